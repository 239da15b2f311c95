"""``triton._internal_testing``'s device predicates, for ported tests that import them.

Only the predicates that answer "which GPU runs here": each asks torch (False without
a CUDA/ROCm device). Ported tutorials use them to skip GPU-only tests; tlxc's own tests
use ``pytest.mark.gpu``.
"""
from __future__ import annotations


def _capability() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the runtime
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def is_hip() -> bool:
    """True on a ROCm build of torch with a visible GPU."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(getattr(torch.version, "hip", None)) and torch.cuda.is_available()


def is_cuda() -> bool:
    """True with an NVIDIA GPU visible."""
    return _capability() is not None and not is_hip()


def is_hopper() -> bool:
    """Compute capability 9.x (tlxc's sm_90a)."""
    cap = _capability()
    return is_cuda() and cap is not None and cap[0] == 9


def is_blackwell() -> bool:
    """Compute capability 10.x (tlxc's sm_100a runs on 10.0 only)."""
    cap = _capability()
    return is_cuda() and cap is not None and cap[0] == 10


def is_hopper_or_newer() -> bool:
    cap = _capability()
    return is_cuda() and cap is not None and cap[0] >= 9
