"""The targets: one frozen ``Target`` per GPU tlxc knows, in one registry.

Every question the compiler asks about the GPU it compiles for -- which vendor,
how wide a warp is, how much shared memory a block may use, whether wgmma or
tcgen05 exist, which backend renders the code -- is a question to the
``Target``, never a comparison of arch names.  ``tlxc/arch.py`` turns what a
user writes (``sm_90``, ``cuda:90``, ``hip:gfx942``) into a key of ``TARGETS``.

Adding a backend: write ``tlxc/codegen_<x>/`` with a ``backend.py`` offering
``build(module, target, *, stages, lineinfo, debug_barriers, options) -> (asm, metadata)``
(see ``codegen_nvptx/backend.py``), then register its targets here with
``backend="tlxc.codegen_<x>.backend"`` (docs/architecture.md, "Adding a backend").

This module sits at the bottom of the package's layers (next to ``errors``): it
imports nothing of tlxc, so every layer may ask it.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ARCH = "sm_90a"

# The features a target may have (``Target.has``):
#   wgmma       Hopper's warpgroup MMA (tlx.async_dot with a register accumulator)
#   setmaxnreg  per-task register budgets of warp-specialized kernels
#   tcgen05     Blackwell's tensor-memory MMA and tensor memory
#   fp8         f8e4m3 / f8e5m2 conversions (sm_89 and newer)
#   gdc         grid dependency control, griddepcontrol (sm_90 and newer)
#   async_proxy the async proxy (TMA, wgmma, tcgen05 read shared memory through it: fence.proxy.async)
#   tensormap   TMA tensor maps encoded in a kernel (tensormap.replace: the arch-specific sm_90a/sm_100a)
#   mfma_cdna4  gfx950's MFMA additions (f16/bf16 16x16x32 and 32x32x16)
#   lds_dma16   16-byte direct-to-LDS loads (gfx950's global_load_lds_dwordx4)
FEATURES = ("wgmma", "setmaxnreg", "tcgen05", "fp8", "gdc", "async_proxy", "tensormap", "mfma_cdna4", "lds_dma16")


@dataclass(frozen=True)
class Target:
    name: str
    vendor: str                          # "nvidia" or "amd"
    capability: tuple[int, int] | None   # NVIDIA compute capability
    gpus: str
    arch_specific: str = ""              # instructions that only this exact target has ("" if none)
    warp_size: int = 32
    shared_limit: int = 49152            # largest dynamic shared memory per block (opt-in), bytes
    features: frozenset[str] = frozenset()
    backend: str | None = None           # the module that renders and builds code; None: not built yet
    stages: tuple[str, ...] = ()         # the code stages its backend makes (keys of STAGE_SUFFIXES), in order

    def has(self, feature: str) -> bool:
        if feature not in FEATURES:
            raise ValueError(f"unknown target feature '{feature}' (known: {', '.join(FEATURES)})")
        return feature in self.features

    @property
    def is_nvidia(self) -> bool:
        return self.vendor == "nvidia"


# The code stages backends make (``Target.stages``; ``compile_kernel(stages=...)``, ``tlxc compile
# --emit``) and the file suffix each is written with (``TLXC_DUMP_DIR``).
STAGE_SUFFIXES = {"cuda": "cu", "ptx": "ptx", "cubin": "cubin", "hip": "hip", "hsaco": "hsaco", "amdgcn": "s"}

_NVPTX = "tlxc.codegen_nvptx.backend"
_AMDGCN = "tlxc.codegen_amdgcn.backend"
_NV_STAGES = ("cuda", "ptx", "cubin")
_AMD_STAGES = ("hip", "hsaco", "amdgcn")

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_90a", "nvidia", (9, 0), "H100, H200", "wgmma and setmaxnreg", shared_limit=232448,
           features=frozenset({"wgmma", "setmaxnreg", "fp8", "gdc", "async_proxy", "tensormap"}), backend=_NVPTX,
           stages=_NV_STAGES),
    Target("sm_100a", "nvidia", (10, 0), "B200, GB200", "tcgen05 and tensor memory", shared_limit=232448,
           features=frozenset({"tcgen05", "fp8", "gdc", "async_proxy", "tensormap"}), backend=_NVPTX,
           stages=_NV_STAGES),
    Target("sm_80", "nvidia", (8, 0), "A100, A30", shared_limit=166912, backend=_NVPTX, stages=_NV_STAGES),
    Target("sm_89", "nvidia", (8, 9), "L4, L40, RTX 40xx", shared_limit=101376, features=frozenset({"fp8"}),
           backend=_NVPTX, stages=_NV_STAGES),
    Target("gfx942", "amd", None, "MI300", warp_size=64, shared_limit=65536, backend=_AMDGCN, stages=_AMD_STAGES),
    Target("gfx950", "amd", None, "MI350", warp_size=64, shared_limit=163840,
           features=frozenset({"mfma_cdna4", "lds_dma16"}),
           backend=_AMDGCN, stages=_AMD_STAGES),
)}


def get_target(name: str) -> Target:
    """The registered target called ``name`` (a key of ``TARGETS``; spellings: ``arch.resolve``)."""
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"no tlxc target '{name}' (targets: {', '.join(TARGETS)})") from None


def target_of(options) -> Target:
    """The target of a compile's options (their ``arch``; the default target without one)."""
    return get_target(getattr(options, "arch", None) or DEFAULT_ARCH)


def has_feature(arch: str, feature: str) -> bool:
    """Whether target ``arch`` has ``feature`` (False for a name that is no target)."""
    target = TARGETS.get(arch)
    return target is not None and target.has(feature)


def vendors() -> tuple[str, ...]:
    """The vendors of the registered targets, in registration order (lowering rules key on them)."""
    return tuple(dict.fromkeys(t.vendor for t in TARGETS.values()))


def vendor_stages(vendor: str) -> tuple[str, ...]:
    """The code stages ``vendor``'s targets make."""
    return tuple(dict.fromkeys(s for t in TARGETS.values() if t.vendor == vendor for s in t.stages))


def targets_of(vendor: str) -> tuple[str, ...]:
    return tuple(name for name, t in TARGETS.items() if t.vendor == vendor)


__all__ = ["DEFAULT_ARCH", "FEATURES", "STAGE_SUFFIXES", "TARGETS", "Target", "get_target", "has_feature", "target_of",
           "targets_of", "vendor_stages", "vendors"]
