"""Render one kernel (IR after the pass pipeline) as self-contained HIP C++ for gfx942 / gfx950.

The text includes no HIP header, so the same source compiles under hipRTC (which predefines the
HIP keywords: the prelude's guards skip) and under the offline clang with ``-nogpuinc``
(``toolchain.py``), and runs on the host CPU against ``emu/tlx_hip_emu.h``.  Register tensors
are per-thread arrays laid out by the shared linear layouts with 64 lanes per wave; the shared
C-style lowering (``codegen_c``) renders the ops, ``HipTarget`` answers its target questions
through the AMDGCN helpers (``amdgcn.py``), and ``rules_hip.py`` holds the ops whose HIP
lowering differs from the shared one.
"""
from __future__ import annotations

import os

from .. import __version__
from ..codegen_c import c_types as C
from ..codegen_c import rules  # noqa: F401  (registers the shared lowering rules)
from ..codegen_c.lower import KernelLowering
from ..codegen_c.words import (
    element_bits,
    pack_words,
    predicated_vector_load_call,
    vector_load_call,
    vector_store_call,
)
from ..errors import CompilationError, InternalCompilerError
from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType
from ..target import get_target
from . import (
    amdgcn,
    rules_hip,  # noqa: F401  (registers the AMD lowering rules)
)
from .prelude import PRELUDE

WAVE = 64
MAX_WORKGROUP = 1024

_TO_F32 = {"f16": "tlx_f16_to_f32", "bf16": "tlx_bf16_to_f32", "f8e4m3": "tlx_f8e4m3_to_f32",
           "f8e5m2": "tlx_f8e5m2_to_f32"}
_FROM_F32 = {"f16": "tlx_f32_to_f16", "bf16": "tlx_f32_to_bf16", "f8e4m3": "tlx_f32_to_f8e4m3",
             "f8e5m2": "tlx_f32_to_f8e5m2"}
_FP8_FROM_F32 = "tlx_f32_to_f8"          # the helper that defines both tlx_f32_to_f8e4m3 and ..._f8e5m2


class HipTarget:
    """The HIP target table of the shared C-style lowering (the counterpart of ``CudaTarget``)."""

    name = "hip"
    vendor = "amd"
    warp_size = WAVE

    def __init__(self, arch: str):
        self.arch = arch
        self.helpers: list[str] = []

    def has(self, feature: str) -> bool:
        """Whether the arch has ``feature`` (tlxc/target.py)."""
        return get_target(self.arch).has(feature)

    def use(self, helper: str) -> None:
        if helper not in amdgcn.HELPERS:
            # a shared rule asked for a CUDA-only helper: that op has no HIP lowering yet
            raise CompilationError(f"{helper.removeprefix('tlx_')} has no HIP lowering for {self.arch} yet "
                                   f"(tlxc's AMD backend covers blocked tl.* kernels)")
        if self.arch not in amdgcn.ONLY_ON.get(helper, (self.arch,)):
            raise InternalCompilerError(f"{helper} needs {' or '.join(amdgcn.ONLY_ON[helper])}, not {self.arch} "
                                        f"(a tlxc bug: the lowering must ask the target)")
        if helper not in self.helpers:
            self.helpers.append(helper)

    def helper_definitions(self) -> str:
        return amdgcn.definitions(self.helpers)

    def expr(self, helper: str, *args) -> str:
        self.use(helper)
        return f"{helper}({', '.join(map(str, args))})"

    def call(self, helper: str, *args) -> str:
        return self.expr(helper, *args) + ";"

    def _unsupported(self, what: str):
        return CompilationError(f"{what} is not supported on {self.arch} (AMD)")

    def no_rule_error(self, op: Operation) -> CompilationError:
        """An op with no HIP lowering, at the user's line: NVIDIA-only hardware (clusters, TMA, tensor
        memory, ...) or not lowered for AMD yet."""
        return CompilationError(f"{op.name} is not supported on {self.arch} (AMD): NVIDIA-only hardware (clusters, "
                                f"TMA, wgmma, tcgen05 / tensor memory, named barriers, ...) or not lowered for AMD yet",
                                op.loc)

    # -- scalars -------------------------------------------------------------------------------
    def to_compute(self, expr: str, t) -> str:
        if isinstance(t, ScalarType) and t.name in _TO_F32:
            return self.expr(_TO_F32[t.name], expr)
        return expr

    def from_compute(self, expr: str, t) -> str:
        if isinstance(t, ScalarType) and t.is_float8:
            self.use(_FP8_FROM_F32)
            return f"{_FROM_F32[t.name]}({expr})"
        if isinstance(t, ScalarType) and t.name in _FROM_F32:
            return self.expr(_FROM_F32[t.name], expr)
        if isinstance(t, ScalarType) and t.is_boolean:
            return f"(bool)({expr})"
        return f"({C.storage_type(t)})({expr})" if not isinstance(t, PointerType) else expr

    def convert(self, expr: str, src, dst) -> str:
        if src == dst:
            return expr
        value = self.to_compute(expr, src)
        if dst.is_boolean:
            return f"({value} != 0)"
        if src.is_float and dst.is_integer:
            return C.float_to_int(self, value, src, dst)
        return self.from_compute(f"({C.compute_type(dst)})({value})", dst)

    def exp2_f32(self, expr: str) -> str:
        return f"exp2f({expr})"          # v_exp_f32 (with the compiler's denormal scaling)

    def div_f32(self, x: str, y: str) -> str:
        return f"(({x}) / ({y}))"         # IEEE division (v_div_scale / v_div_fmas / v_div_fixup)

    def sqrt_f32(self, expr: str) -> str:
        return f"sqrtf({expr})"

    def round_tf32(self, expr: str) -> str:
        raise self._unsupported("tf32 rounding")

    # -- threads and barriers --------------------------------------------------------------------
    def group_sync(self, scope) -> str:
        if scope.bar_id is not None:
            raise self._unsupported("a barrier over part of the work-group (named barriers are NVIDIA-only)")
        return self.call("tlx_syncthreads")

    def opaque_pointer(self, expr: str) -> str:
        """The pointer as it is (the pipelined ring's addressing is NVIDIA's)."""
        return expr

    def shfl_xor(self, expr: str, mask: int, ctype: str) -> str:
        self.use("tlx_shfl_xor")
        if ctype in ("bool", "signed char", "unsigned char", "short", "unsigned short"):
            return f"({ctype})tlx_shfl_xor<{mask}>((int)({expr}))"
        return f"tlx_shfl_xor<{mask}>({expr})"

    def fence(self, scope: str) -> str:
        raise self._unsupported(f"the {scope} fence")

    # NVIDIA-only machinery (or not lowered for AMD yet): a clear error, never CUDA text
    def _refuse(what):
        def method(self, *args, **kwargs):
            raise self._unsupported(what)
        return method

    mbarrier_init = mbarrier_wait = mbarrier_arrive = mbarrier_expect_tx = _refuse(
        "mbarriers (TLX's LDS software barriers on AMD are not lowered yet)")
    mbarrier_arrive_remote = _refuse("a remote (cluster) mbarrier arrive")
    named_sync = named_arrive = _refuse("named barriers (NVIDIA-only)")
    cp_async = cp_async_commit = cp_async_wait = _refuse("cp.async (async_load to LDS is not lowered yet)")
    setmaxnreg = _refuse("setmaxnreg (NVIDIA-only)")
    atomic = _refuse("atomics")
    load_hinted = store_hinted = eviction_index = _refuse("cache modifiers / eviction policies / volatile")
    tma_reduce_index = _refuse("TMA (NVIDIA-only)")
    mma_m16n8k16 = _refuse("mma.sync (NVIDIA-only; tl.dot on AMD is MFMA)")
    user_inline_asm = _refuse("tl.inline_asm_elementwise (its text is PTX-specific)")
    del _refuse

    # -- memory --------------------------------------------------------------------------------
    def load_vector(self, dst: str, ptr: str, pred: str, fill: str, t, width: int, attrs) -> str:
        _no_hints(attrs, self.arch)
        bits = width * element_bits(t)
        if bits < 32:
            return f"{dst}[i] = ({pred}) ? *{ptr} : {fill};"
        helper = f"tlx_ld_global_b{bits}"
        self.use(helper)
        return predicated_vector_load_call(helper, dst, ptr, pred, fill, t, width)

    def store_vector(self, src: str, ptr: str, pred: str, t, width: int, attrs) -> str:
        _no_hints(attrs, self.arch)
        bits = width * element_bits(t)
        if bits < 32:
            return f"if ({pred}) *{ptr} = {src}[i];"
        helper = f"tlx_st_global_b{bits}"
        self.use(helper)
        packed = pack_words([f"{src}[i + {j}]" for j in range(width)], t, bits // 32)
        return f"{helper}({ptr}, {pred}, {', '.join(packed)});"

    def load_shared_vector(self, dst: str, ptr: str, t, width: int) -> str:
        """``dst[i..i+width)`` from LDS at ``ptr`` (32 to 128 bits, aligned)."""
        helper = f"tlx_ld_lds_b{element_bits(t) * width}"
        self.use(helper)
        return vector_load_call(helper, dst, ptr, t, width)

    def store_shared_vector(self, src: str, ptr: str, t, width: int) -> str:
        helper = f"tlx_st_lds_b{element_bits(t) * width}"
        self.use(helper)
        return vector_store_call(helper, src, ptr, t, width)


def _no_hints(attrs, arch: str) -> None:
    if attrs and any(attrs.get(k) for k in ("cache", "eviction", "volatile")):
        raise CompilationError(f"cache modifiers / eviction policies / volatile are not supported on {arch} yet")








def render_kernel(kernel: Operation, arch: str) -> tuple[str, dict]:
    """(source, info): info has ``name``, ``threads``, ``lds_bytes`` and ``params`` (C-ABI kinds)."""
    target = HipTarget(arch)
    target.use("tlx_workitem_id_x")     # tid and warp, below
    target.use("tlx_readfirstlane")
    lw = KernelLowering(kernel, target)
    body = kernel.regions[0].block
    for op in body.ops:
        if op.name == "tlx.async_tasks":
            raise CompilationError("warp specialization (tlx.async_tasks) is not supported on AMD yet: "
                                   "AMD kernels overlap work with ping-pong / warp-pipeline schedules", op.loc)
    if kernel.attrs.get("cluster_dims"):
        raise CompilationError("thread-block clusters do not exist on AMD GPUs", kernel.loc)
    params, kinds, narrow = [], [], []
    for arg in body.args:
        name = lw.define(arg)
        kind = param_kind(arg.type, kernel.loc)
        kinds.append(kind)
        if getattr(arg.type, "bits", 32) < 32 and not isinstance(arg.type, PointerType):
            params.append(f"{'unsigned' if kind == 'u32' else 'int'} {name}_arg")
            narrow.append(f"const {C.storage_type(arg.type)} {name} = ({C.storage_type(arg.type)}){name}_arg;")
        else:
            params.append(f"{C.storage_type(arg.type)} {name}")
    lw.out.depth = 1
    lw.lower_block(body)
    threads = WAVE * lw.num_warps
    if threads > MAX_WORKGROUP:
        raise CompilationError(f"num_warps={lw.num_warps} makes {threads} work-items; an AMD work-group has at "
                               f"most {MAX_WORKGROUP} (16 waves of 64)", kernel.loc)
    name = kernel.attrs.get("symbol", kernel.attrs["sym_name"])
    source_file = os.path.basename(kernel.loc.file) if kernel.loc else "?"
    lines = [f"// Generated by tlxc {__version__} for {arch} (HIP, wave64) from {source_file}; do not edit.",
             "// Register tensors are per-thread arrays; 16-bit floats are stored as bits",
             "// and computed on in float32.  No HIP header needed.", "", PRELUDE]
    helpers = target.helper_definitions()
    if helpers:
        lines += ["", helpers]
    attributes = f"amdgpu_flat_work_group_size(1, {threads})"
    if kernel.attrs.get("waves_per_eu"):                 # Triton's waves_per_eu: at least N waves per SIMD
        attributes += f", amdgpu_waves_per_eu({kernel.attrs['waves_per_eu']})"
    lines += ["", f'extern "C" __global__ void __attribute__(({attributes}))',
              f"{name}({', '.join(params)}) {{"]
    user_bytes = kernel.attrs.get("shared_bytes", 0)
    lds = max(_align16(user_bytes) + lw.scratch_bytes, lw.overlay_bytes)
    if lds:
        lines.append(f"  __shared__ __attribute__((aligned(16))) unsigned char tlx_smem[{lds}];")
    lines += ["  const int tid = tlx_workitem_id_x();", "  const int lane = tid & 63;",
              "  const int warp = tlx_readfirstlane(tid >> 6);"]
    lines += ["  " + p for p in narrow + lw.scratch_definitions(user_bytes) + lw.prologue]
    lines += lw.out.lines
    lines += ["  " + e for e in lw.epilogue]
    lines.append("}")
    info = {"name": name, "threads": threads, "lds_bytes": lds, "params": kinds, "scratch_bytes": 0}
    return "\n".join(lines) + "\n", info


def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


def param_kind(t, loc=None) -> str:
    """The launcher's C-ABI kind of a kernel parameter (runtime/hip.py packs by it)."""
    from ..ir.types import TensorDescType
    if isinstance(t, PointerType):
        return "u64"
    if isinstance(t, TensorDescType):
        raise CompilationError("tensor descriptors (TMA) do not exist on AMD GPUs: pass pointers and strides", loc)
    kinds = {"i1": "i32", "i8": "i32", "i16": "i32", "i32": "i32", "i64": "i64", "u8": "u32", "u16": "u32",
             "u32": "u32", "u64": "u64", "f32": "f32", "f64": "f64"}
    if t.name not in kinds:
        raise InternalCompilerError(f"no HIP parameter kind for {t}")
    return kinds[t.name]


__all__ = ["PRELUDE", "HipTarget", "param_kind", "render_kernel"]
