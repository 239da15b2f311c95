"""``CompileOptions``: what one compile depends on besides the kernel and its specialization.

One frozen, typed object that the frontend (``ctx.options``), every pass (the
``options`` of ``Pass.run``) and the checker read; a field that does not exist
is a ``TypeError`` at construction, never an option silently ignored.  The
launch options a backend alone reads (``maxnreg``, ``enable_fp_fusion``) travel
to ``target.backend.build`` as they are.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .target import DEFAULT_ARCH, Target, get_target

# Compile switches kept for A/B measurements of the tl.dot K loop (docs/performance.md, "Matmul:
# the K loop Triton's way"), name -> default.  Unset (or empty): the default; "0": off; any other
# value: on.  Each is in the compile key (runtime/launch.py:COMPILE_ENV).
PERF_SWITCHES = {
    "TLXC_RING_COUNTER": True,     # passes/pipeline.py: the ring stage as a carried, wrapping counter
    "TLXC_RING_BASE": True,        # passes/pipeline.py: copies from an opaque initial pointer + offset
    "TLXC_SHARED_IMM": True,       # codegen_nvptx/rules_tlx.py: cp.async shared addresses as base + constants
    "TLXC_CPASYNC_FENCE": True,    # codegen_c/shared_order.py: the proxy fence after a cp.async wait
    "TLXC_WGMMA_RS_GROUP": False,  # codegen_nvptx/rules_mma_async.py: register-A wgmma as one group (tasks >= 232 regs)
    "TLXC_WGMMA_A_LDMATRIX": True,  # passes/layouts.py: a loaded wgmma register A read by ldmatrix, no conversion
    "TLXC_REDUCE_TREE": False,     # codegen_c/rules_tensor.py: a thread's max/min/and/or/xor as a pairwise tree
    "TLXC_REDUCE_TREE_SUM": False,  # codegen_c/rules_tensor.py: a thread's sums as a pairwise tree
}


# The launch options that change what is compiled (runtime/launch.py, LaunchConfig.compile_options) and
# check-barriers' switch: what compile_kernel / kernel.compile take besides their named arguments
COMPILE_OPTIONS = ("maxnreg", "enable_fp_fusion", "num_stages", "num_ctas", "waves_per_eu", "check_barriers")
# Triton options tlxc refuses, and why (a clear error at the launch or compile, not "unexpected keyword")
REFUSED_OPTIONS = {
    "extern_libs": "tlxc does not link external bitcode libraries: tl.extra.libdevice (tl.math) functions "
                   "are tlxc's own lowerings to the CUDA / HIP math library the target compiler ships; "
                   "remove extern_libs",
    "allow_flush_denorm": "tlxc keeps float32 denormals on every target (the interpreter's results would "
                          "differ from a flushing GPU's); remove allow_flush_denorm",
}


def perf_switch(name: str) -> bool:
    """Whether compile switch ``name`` (a key of ``PERF_SWITCHES``) is on."""
    value = os.environ.get(name, "")
    return PERF_SWITCHES[name] if value == "" else value != "0"


@dataclass(frozen=True)
class CompileOptions:
    arch: str = DEFAULT_ARCH                          # a key of tlxc.target.TARGETS
    num_warps: int = 4
    cluster: tuple[int, int, int] | None = None       # ctas_per_cga; None: no clusters
    num_ctas: int = 1                                 # Triton's num_ctas: CTAs per program (launch.py)
    num_stages: int | None = None                     # pipeline-loads' default depth (the launch's num_stages)
    check_barriers: bool = True                       # False: skip the barrier-protocol findings
    debug_barriers: bool = False                      # a TLXC_DEBUG_BARRIERS build: barrier findings warn

    def __post_init__(self) -> None:
        if self.cluster is not None:
            object.__setattr__(self, "cluster", tuple(self.cluster))

    @property
    def target(self) -> Target:
        return get_target(self.arch)


__all__ = ["PERF_SWITCHES", "CompileOptions", "perf_switch"]
