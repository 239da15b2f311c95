"""``tl.target_info``: Triton's compile-time queries of the target (``is_cuda()``,
``cuda_capability_geq(9, 0)``, ``is_hip()``, ``is_hip_cdna3()``, ``is_hip_cdna4()``,
``current_target()``), for kernels that guard an instruction on it.

Each is a builtin: evaluated while compiling, on the architecture the kernel is compiled for
(``--arch``, the launch's device), and gives a compile-time value.  Triton answers with the active
driver's device; the two agree wherever tlxc compiles for the device it launches on.  Rules:
``tlxc/frontend/builtins.py`` under ``"target_info.<name>"``.
"""
from __future__ import annotations

import inspect

from .core import outside_kernel_error

__all__ = ["cuda_capability_geq", "current_target", "is_cuda", "is_hip", "is_hip_cdna3", "is_hip_cdna4"]


def _builtin(name: str, params: str, doc: str):
    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"tl.target_info.{name}")

    parameters = []
    for spec in params.split():
        pname, _, default = spec.partition("=")
        parameters.append(inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=int(default) if default else inspect.Parameter.empty))
    outside_kernel.__name__ = outside_kernel.__qualname__ = name
    outside_kernel.__doc__ = doc
    outside_kernel.__signature__ = inspect.Signature(parameters)
    outside_kernel.__tlxc_builtin__ = f"target_info.{name}"
    outside_kernel.__tlxc_signature__ = outside_kernel
    return outside_kernel


current_target = _builtin("current_target", "", "(backend, arch, warp_size) of the compile target: "
                          "('cuda', 90, 32) for sm_90a, ('hip', 'gfx942', 64) for gfx942.")
is_cuda = _builtin("is_cuda", "", "Whether the kernel is compiled for an NVIDIA GPU.")
cuda_capability_geq = _builtin("cuda_capability_geq", "major minor=0",
                               "Whether the NVIDIA compute capability is at least major.minor.")
is_hip = _builtin("is_hip", "", "Whether the kernel is compiled for an AMD GPU.")
is_hip_cdna3 = _builtin("is_hip_cdna3", "", "Whether the target is gfx942 (MI300).")
is_hip_cdna4 = _builtin("is_hip_cdna4", "", "Whether the target is gfx950 (MI350).")
