"""The targets tlxc knows, in one table, and the spellings a user may write for them.

tlxc generates code for four NVIDIA targets and runs the frontend, the passes
and ``tlxc check`` for two AMD ones (their backend is not built yet):

=========  ===================  ==========================================
target     compute capability   GPUs
=========  ===================  ==========================================
sm_80      8.0                  A100, A30
sm_89      8.9                  L4, L40, RTX 40xx (fp8 conversions)
sm_90a     9.0                  H100, H200 (wgmma, setmaxnreg: arch-specific)
sm_100a    10.0                 B200, GB200 (tcgen05, tensor memory: arch-specific)
gfx942     -                    MI300
gfx950     -                    MI350
=========  ===================  ==========================================

Users may name a target as the CUDA toolchain or Triton name the GPU: the
plain compute capability (``sm_90``, ``sm90``, ``cuda:90``, ``90``) or, for
AMD, ``hip:gfx942``.  A plain name resolves to the one target tlxc builds for
that GPU: ``sm_90`` to ``sm_90a`` and ``sm_100`` to ``sm_100a``, whose cubins
run on compute capability 9.0 / 10.0 exactly (the arch-specific instructions
wgmma, setmaxnreg, tcgen05 and tensor memory exist only there).  GPUs tlxc has
no target for (sm_86, sm_103, sm_120, ...) are refused with the reason.

The table itself (``Target``: vendor, warp size, shared memory, features,
backend) is ``tlxc/target.py``'s registry; this module reads the spellings.
Everything that names targets takes them from here: the compiler, the
command line, the launch path (the local GPU's target), the interpreter's
``TLXC_INTERPRET_ARCH`` and NVRTC's list of supported architectures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .target import TARGETS, Target, get_target, targets_of

NVIDIA_ARCHS: tuple[str, ...] = targets_of("nvidia")
AMD_ARCHS: tuple[str, ...] = targets_of("amd")
ARCHS: tuple[str, ...] = NVIDIA_ARCHS + AMD_ARCHS

# GPUs without a target of their own, and why (the message of a refused --arch).
_NO_TARGET = {
    (8, 6): "sm_86 (RTX 30xx, A40) has less shared memory than sm_80 (99 KB, not 163 KB), which tlxc's "
            "allocator would exceed; there is no sm_86 target yet",
    (8, 7): "sm_87 (Jetson Orin) has no target yet",
    (10, 1): "sm_101 has no target yet",
    (10, 3): "sm_103 (B300) has no target yet: sm_100a cubins run on compute capability 10.0 only",
    (11, 0): "sm_110 has no target yet",
    (12, 0): "sm_120 (RTX 50xx, RTX PRO Blackwell) is not supported: it lacks the tcgen05 instructions and "
             "tensor memory of tlxc's Blackwell target sm_100a, and tlxc has no sm_120 code generation",
    (12, 1): "sm_121 (DGX Spark) is not supported: it lacks the tcgen05 instructions and tensor memory of "
             "tlxc's Blackwell target sm_100a, and tlxc has no sm_121 code generation",
}

_NVIDIA_SPELLING = re.compile(r"(?:sm_?|cuda:|compute_)?(\d{2,3})(a?)")
_AMD_SPELLING = re.compile(r"(?:hip:)?(gfx[0-9a-f]+)")


class ArchError(ValueError):
    """A target name tlxc cannot compile for; the message says why and what it accepts."""


@dataclass(frozen=True)
class Resolved:
    arch: str             # a key of TARGETS
    written: str          # what the user wrote
    plain: bool           # a plain compute capability mapped to an arch-specific target (sm_90 -> sm_90a)


def accepted() -> str:
    """The spellings, for help texts and error messages."""
    return (", ".join(ARCHS) + "; or the plain compute capability: sm_90 (= sm_90a), sm_100 (= sm_100a), "
            "sm_80, sm_89, also written cuda:90 or 90")


def resolve(text: str) -> Resolved:
    """The target ``text`` names, or ``ArchError`` saying why there is none."""
    written = text
    text = text.strip().lower()
    if text in TARGETS:
        return Resolved(text, written, False)
    amd = _AMD_SPELLING.fullmatch(text)
    if amd and amd.group(1) in TARGETS:
        return Resolved(amd.group(1), written, False)
    nvidia = _NVIDIA_SPELLING.fullmatch(text)
    if nvidia is None:
        raise ArchError(f"unknown arch '{written}' (expected one of {accepted()})")
    number, suffix = int(nvidia.group(1)), nvidia.group(2)
    capability = (number // 10, number % 10)
    target = _target_of_capability(capability)
    if target is None:
        raise ArchError(f"no tlxc target for '{written}': {_why_not(capability)} (targets: {accepted()})")
    if suffix and target.name != f"sm_{number}a":
        raise ArchError(f"unknown arch '{written}': {target.name} has no arch-specific variant; write {target.name}")
    return Resolved(target.name, written, plain=not suffix and bool(target.arch_specific))


def arch_for_capability(major: int, minor: int) -> str:
    """The target of a GPU of compute capability ``major.minor`` (the launch path's choice)."""
    target = _target_of_capability((major, minor))
    if target is None:
        raise ArchError(f"this GPU (compute capability {major}.{minor}) has no tlxc target: "
                        f"{_why_not((major, minor))}")
    return target.name


def local_arch() -> str | None:
    """The target of the current CUDA device, or None without one (torch is asked, if installed)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return arch_for_capability(*torch.cuda.get_device_capability())


def arch_specific_use(module, arch: str) -> str | None:
    """The arch-specific instructions of ``arch`` that ``module`` (IR after the passes) uses, as
    words for a note (``"wgmma and setmaxnreg"``), or None when it uses none."""
    used = [feature for op in module.walk() for feature in _exact_target_features(op, arch)]
    return " and ".join(dict.fromkeys(sorted(used))) or None


def _exact_target_features(op, arch: str) -> list[str]:
    target = get_target(arch)
    if target.has("wgmma"):
        registers = op.name == "tlx.async_tasks" and any(task[2] for task in op.attrs.get("tasks", ()))
        return ["wgmma"] * (op.name == "tlx.async_dot") + ["setmaxnreg"] * registers
    if target.has("tcgen05"):
        tmem = any(getattr(r.type, "storage", None) == "tmem" for r in op.results)
        return ["tcgen05"] * op.name.startswith("tlx.tcgen05") + ["tensor memory"] * tmem
    return []


def _target_of_capability(capability: tuple[int, int]) -> Target | None:
    for target in TARGETS.values():
        if target.capability == capability:
            return target
    return None


def _why_not(capability: tuple[int, int]) -> str:
    major, minor = capability
    if capability in _NO_TARGET:
        return _NO_TARGET[capability]
    if major < 8:
        return f"sm_{major}{minor} is older than tlxc's oldest target, sm_80 (compute capability 8.0)"
    return f"no GPU of compute capability {major}.{minor} is a tlxc target"


__all__ = ["AMD_ARCHS", "ARCHS", "NVIDIA_ARCHS", "TARGETS", "ArchError", "Resolved", "Target", "accepted",
           "arch_for_capability", "arch_specific_use", "local_arch", "resolve"]
