"""AMDGCN helpers: every AMDGCN builtin (and inline asm, where a builtin is missing) the generated
HIP uses lives in exactly one device function here, as ``codegen_nvptx/ptx.py`` does for PTX.
Nobody writes ``__builtin_amdgcn_*`` or ``asm`` elsewhere.

``HELPERS[name]`` is the C++ definition; ``DEPENDS[name]`` the helpers it calls.  The HIP target
emits only the helpers a kernel uses, dependencies first, in the order of this file.

Two kinds of helper:

* builtin wrappers (``BUILTINS`` lists the builtins each one calls): one AMDGCN builtin each.
  The CPU emulation (``emu/tlx_hip_emu.h``) implements these builtins, written from AMD's ISA
  documents, so the same HIP text runs on the host;
* plain C++ (conversions, vector memory access, shuffles composed of the wrappers): no builtin,
  so the emulation runs exactly the code the GPU runs.
"""
from __future__ import annotations

HELPERS: dict[str, str] = {}
DEPENDS: dict[str, tuple[str, ...]] = {}
BUILTINS: dict[str, tuple[str, ...]] = {}     # helper -> the __builtin_amdgcn_* it calls

_INLINE = "static __device__ __forceinline__"


def define(name: str, text: str, *depends: str, builtins: tuple[str, ...] = ()) -> None:
    """Register helper ``name`` with its C++ ``text``, the helpers it calls and its builtins."""
    if name in HELPERS:
        raise ValueError(f"AMDGCN helper {name} defined twice")
    HELPERS[name] = text.strip("\n")
    DEPENDS[name] = depends
    BUILTINS[name] = builtins


def helper(name: str, *depends: str, builtins: tuple[str, ...] = ()):
    def register(fn):
        define(name, fn(), *depends, builtins=builtins)
        return fn
    return register


def definitions(names) -> str:
    """The definitions of ``names`` and their dependencies, dependencies first, in file order."""
    wanted: set[str] = set()

    def add(name):
        if name in wanted:
            return
        if name not in HELPERS:
            raise KeyError(name)
        wanted.add(name)
        for dep in DEPENDS[name]:
            add(dep)
    for name in names:
        add(name)
    return "\n\n".join(HELPERS[n] for n in HELPERS if n in wanted)


# -- work-item and work-group ids ----------------------------------------------------------------
@helper("tlx_workitem_id_x", builtins=("__builtin_amdgcn_workitem_id_x",))
def workitem_id_x():
    return f"""
{_INLINE} int tlx_workitem_id_x() {{ return (int)__builtin_amdgcn_workitem_id_x(); }}"""


for _axis in "xyz":
    define(f"tlx_workgroup_id_{_axis}", f"""
{_INLINE} int tlx_workgroup_id_{_axis}() {{ return (int)__builtin_amdgcn_workgroup_id_{_axis}(); }}""",
           builtins=(f"__builtin_amdgcn_workgroup_id_{_axis}",))


@helper("tlx_num_workgroups", builtins=("__builtin_amdgcn_dispatch_ptr",))
def num_workgroups():
    # The HSA kernel dispatch packet: workgroup_size_{x,y,z} (u16) at bytes 4, 6, 8 and
    # grid_size_{x,y,z} (u32, in work-items) at bytes 12, 16, 20 (HSA runtime spec, 2.9).
    return f"""
{_INLINE} int tlx_num_workgroups(int axis) {{
  const unsigned char* p = (const unsigned char*)__builtin_amdgcn_dispatch_ptr();
  unsigned grid = *(const unsigned*)(p + 12 + 4 * axis);
  unsigned group = *(const unsigned short*)(p + 4 + 2 * axis);
  return (int)((grid + group - 1) / group);
}}"""


# -- barriers and scheduling --------------------------------------------------------------------
@helper("tlx_s_barrier", builtins=("__builtin_amdgcn_s_barrier",))
def s_barrier():
    # s_barrier alone: every wave of the work-group reaches it (no memory ordering).
    return f"""
{_INLINE} void tlx_s_barrier() {{ __builtin_amdgcn_s_barrier(); }}"""


@helper("tlx_fence_workgroup", builtins=("__builtin_amdgcn_fence",))
def fence_workgroup():
    return f"""
{_INLINE} void tlx_fence_release_workgroup() {{ __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); }}
{_INLINE} void tlx_fence_acquire_workgroup() {{ __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); }}"""


@helper("tlx_syncthreads", "tlx_s_barrier", "tlx_fence_workgroup")
def syncthreads():
    # __syncthreads as HIP defines it: LDS and global writes before are visible to the
    # work-group after (release fence, s_barrier, acquire fence; the fences add the s_waitcnt).
    return f"""
{_INLINE} void tlx_syncthreads() {{
  tlx_fence_release_workgroup();
  tlx_s_barrier();
  tlx_fence_acquire_workgroup();
}}"""


@helper("tlx_s_setprio", builtins=("__builtin_amdgcn_s_setprio",))
def s_setprio():
    # the wave's issue priority 0..3 (warp-pipeline / ping-pong stages)
    return f"""
template <int P> {_INLINE} void tlx_s_setprio() {{
  static_assert(P >= 0 && P <= 3, "s_setprio takes 0..3");
  __builtin_amdgcn_s_setprio(P);
}}"""


@helper("tlx_sched_barrier", builtins=("__builtin_amdgcn_sched_barrier",))
def sched_barrier():
    # a compiler scheduling fence (mask 0: nothing crosses it); no instruction
    return f"""
template <int MASK> {_INLINE} void tlx_sched_barrier() {{ __builtin_amdgcn_sched_barrier(MASK); }}"""


@helper("tlx_s_sleep", builtins=("__builtin_amdgcn_s_sleep",))
def s_sleep():
    # s_sleep 1: the wave yields its issue slots for ~64 cycles (a polite spin-wait)
    return f"""
{_INLINE} void tlx_s_sleep() {{ __builtin_amdgcn_s_sleep(1); }}"""


# TLX's mbarriers on AMD, in LDS software (AMD has no hardware async barrier): two 32-bit words,
# [0] = pending arrivals (bits 30:0) and the phase parity (bit 31), [1] = the arrivals a phase
# needs.  The arrival that completes a phase resets the count and flips the parity; a wait for
# parity P returns once the current parity differs from P (mbarrier.try_wait.parity's rule).
@helper("tlx_lds_barrier", "tlx_s_sleep")
def lds_barrier():
    return f"""
{_INLINE} void tlx_lds_barrier_init(unsigned* bar, unsigned expected) {{ bar[0] = 0u; bar[1] = expected; }}
{_INLINE} void tlx_lds_barrier_arrive(unsigned* bar, unsigned count) {{
  const unsigned old = __atomic_fetch_add(bar, count, __ATOMIC_ACQ_REL);
  if ((old & 0x7fffffffu) + count >= bar[1]) __atomic_store_n(bar, (old & 0x80000000u) ^ 0x80000000u, __ATOMIC_RELEASE);
}}
{_INLINE} void tlx_lds_barrier_wait(unsigned* bar, unsigned parity) {{
  while ((__atomic_load_n(bar, __ATOMIC_ACQUIRE) >> 31) == (parity & 1u)) tlx_s_sleep();
}}"""


# -- wave-level data movement ---------------------------------------------------------------------
@helper("tlx_readfirstlane", builtins=("__builtin_amdgcn_readfirstlane",))
def readfirstlane():
    # the value of the first active lane, in a scalar register (uniform from then on)
    return f"""
{_INLINE} int tlx_readfirstlane(int x) {{ return __builtin_amdgcn_readfirstlane(x); }}"""


@helper("tlx_readlane", builtins=("__builtin_amdgcn_readlane",))
def readlane():
    return f"""
{_INLINE} int tlx_readlane(int x, int lane) {{ return __builtin_amdgcn_readlane(x, lane); }}"""


@helper("tlx_ballot", builtins=("__builtin_amdgcn_ballot_w64",))
def ballot():
    # bit l set where lane l is active and ``pred`` holds (wave64)
    return f"""
{_INLINE} unsigned long long tlx_ballot(bool pred) {{ return __builtin_amdgcn_ballot_w64(pred); }}"""


@helper("tlx_ds_bpermute", builtins=("__builtin_amdgcn_ds_bpermute",))
def ds_bpermute():
    # lane l gets ``x`` of lane ``src_lane`` (any lane of the wave; through the LDS crossbar,
    # no LDS allocated)
    return f"""
{_INLINE} unsigned tlx_ds_bpermute(int src_lane, unsigned x) {{
  return (unsigned)__builtin_amdgcn_ds_bpermute(src_lane << 2, (int)x);
}}"""


@helper("tlx_ds_swizzle", builtins=("__builtin_amdgcn_ds_swizzle",))
def ds_swizzle():
    # ds_swizzle_b32 with a constant pattern; bit-mask mode (bit 15 clear) within each 32 lanes:
    # source lane = ((lane & and_mask) | or_mask) ^ xor_mask, masks 5 bits at 0, 5, 10
    return f"""
template <int PATTERN> {_INLINE} unsigned tlx_ds_swizzle(unsigned x) {{
  return (unsigned)__builtin_amdgcn_ds_swizzle((int)x, PATTERN);
}}"""


@helper("tlx_dpp", builtins=("__builtin_amdgcn_update_dpp",))
def dpp():
    # v_mov_b32_dpp with a constant control, all rows and banks enabled; DPP_QUAD_PERM (0x00-0xff):
    # lane 4q+i reads lane 4q+sel_i; DPP_ROW_ROR (0x121-0x12f): lane r*16+i reads r*16+(i+n)%16
    return f"""
template <int CTRL> {_INLINE} unsigned tlx_dpp(unsigned x) {{
  return (unsigned)__builtin_amdgcn_update_dpp(0, (int)x, CTRL, 0xf, 0xf, false);
}}"""


DPP_QUAD_XOR1 = 0xB1       # quad_perm [1, 0, 3, 2]
DPP_QUAD_XOR2 = 0x4E       # quad_perm [2, 3, 0, 1]
DPP_ROW_ROR8 = 0x128       # row_ror:8 (== xor 8 within a row of 16)


def swizzle_xor(mask: int) -> int:
    """The ds_swizzle bit-mask pattern of ``lane ^ mask`` (mask < 32)."""
    if not 0 < mask < 32:
        raise ValueError(f"ds_swizzle xors within 32 lanes, not {mask}")
    return (mask << 10) | 0x1F


@helper("tlx_shfl_xor", "tlx_dpp", "tlx_ds_swizzle", "tlx_ds_bpermute", "tlx_workitem_id_x")
def shfl_xor():
    # ``x`` of lane ^ MASK, by the cheapest route for the mask: DPP (xor 1, 2, 8), ds_swizzle
    # (xor 4, 16, and any other mask < 32), ds_bpermute (xor 32 and up: across the 32-lane halves)
    return f"""
template <int MASK> {_INLINE} unsigned tlx_shfl_xor_b32(unsigned x) {{
  static_assert(MASK > 0 && MASK < 64, "a wave64 xor mask");
  if constexpr (MASK == 1) return tlx_dpp<{DPP_QUAD_XOR1:#x}>(x);
  else if constexpr (MASK == 2) return tlx_dpp<{DPP_QUAD_XOR2:#x}>(x);
  else if constexpr (MASK == 8) return tlx_dpp<{DPP_ROW_ROR8:#x}>(x);
  else if constexpr (MASK < 32) return tlx_ds_swizzle<(MASK << 10) | 0x1f>(x);
  else return tlx_ds_bpermute((tlx_workitem_id_x() & 63) ^ MASK, x);
}}
template <int MASK> {_INLINE} float tlx_shfl_xor(float x) {{
  return __builtin_bit_cast(float, tlx_shfl_xor_b32<MASK>(__builtin_bit_cast(unsigned, x)));
}}
template <int MASK> {_INLINE} int tlx_shfl_xor(int x) {{ return (int)tlx_shfl_xor_b32<MASK>((unsigned)x); }}
template <int MASK> {_INLINE} unsigned tlx_shfl_xor(unsigned x) {{ return tlx_shfl_xor_b32<MASK>(x); }}
template <int MASK> {_INLINE} double tlx_shfl_xor(double x) {{
  unsigned long long b = __builtin_bit_cast(unsigned long long, x);
  unsigned lo = tlx_shfl_xor_b32<MASK>((unsigned)b), hi = tlx_shfl_xor_b32<MASK>((unsigned)(b >> 32));
  return __builtin_bit_cast(double, ((unsigned long long)hi << 32) | lo);
}}
template <int MASK> {_INLINE} long long tlx_shfl_xor(long long x) {{
  unsigned lo = tlx_shfl_xor_b32<MASK>((unsigned)x), hi = tlx_shfl_xor_b32<MASK>((unsigned)((unsigned long long)x >> 32));
  return (long long)(((unsigned long long)hi << 32) | lo);
}}
template <int MASK> {_INLINE} unsigned long long tlx_shfl_xor(unsigned long long x) {{
  return (unsigned long long)tlx_shfl_xor<MASK>((long long)x);
}}"""


# -- direct-to-LDS loads (gfx950) -----------------------------------------------------------------
@helper("tlx_global_load_lds_b128", builtins=("__builtin_amdgcn_global_load_lds",))
def global_load_lds_b128():
    # global_load_lds_dwordx4: lane l's 16 bytes at ``src`` land in LDS at ``wave_base`` + 16 l
    # (wave_base must be the same in every lane: it goes to M0).  gfx950 only (gfx942: 4 bytes).
    return f"""
{_INLINE} void tlx_global_load_lds_b128(const void* src, void* wave_base) {{
  __builtin_amdgcn_global_load_lds((__attribute__((address_space(1))) void*)src,
                                   (__attribute__((address_space(3))) void*)wave_base, 16, 0, 0);
}}"""


@helper("tlx_zero16")
def zero16():
    # 16 zero bytes in global memory: a masked-off lane's source for a direct-to-LDS load, so that
    # every lane of the wave takes part in the one instruction and its LDS slot gets zeros
    return """
__device__ __attribute__((aligned(16))) const unsigned tlx_zero16[4] = {0u, 0u, 0u, 0u};"""


@helper("tlx_s_waitcnt_vmcnt0", builtins=("__builtin_amdgcn_s_waitcnt",))
def s_waitcnt_vmcnt0():
    # s_waitcnt vmcnt(0): every vector memory load of the wave has completed (gfx9 encoding:
    # vmcnt in bits 3:0 and 15:14 = 0, expcnt 6:4 = 7 and lgkmcnt 11:8 = 15 left alone)
    return f"""
{_INLINE} void tlx_s_waitcnt_vmcnt0() {{ __builtin_amdgcn_s_waitcnt(0x0f70); }}"""


# -- MFMA (matrix fused multiply-add, one wave) --------------------------------------------------
# Operands are GCC vector types (``vector_size``: clang's builtins take them, and g++ compiles the
# emulation).  A lane holds K/(64/M) consecutive k of one row of A (lane i + M*(k / per_lane)) and
# of one column of B; the accumulator layout is the instruction's (CDNA3/CDNA4 ISA, "Matrix
# fused multiply-add").  The target chooses the instruction: gfx950 adds 16x16x32 / 32x32x16.
@helper("tlx_mfma_types")
def mfma_types():
    return """
typedef _Float16 tlx_f16x4 __attribute__((vector_size(8)));
typedef _Float16 tlx_f16x8 __attribute__((vector_size(16)));
typedef short tlx_bf16x4 __attribute__((vector_size(8)));
typedef float tlx_f32x4 __attribute__((vector_size(16)));
typedef float tlx_f32x16 __attribute__((vector_size(64)));
typedef unsigned char tlx_u8x8 __attribute__((vector_size(8)));
typedef short tlx_bf16x8 __attribute__((vector_size(16)));
#ifdef TLX_HIP_EMU
typedef short tlx_bf16x8_native __attribute__((vector_size(16)));   /* the host g++ has no __bf16 */
#else
typedef __bf16 tlx_bf16x8_native __attribute__((vector_size(16)));  /* gfx950's bf16 MFMAs take __bf16 */
#endif"""


MFMA = {   # helper -> (builtin, A/B type, accumulator type, M, N, K, archs)
    "tlx_mfma_f32_32x32x8_f16": ("__builtin_amdgcn_mfma_f32_32x32x8f16", "tlx_f16x4", "tlx_f32x16", 32, 32, 8,
                                 ("gfx942", "gfx950")),
    "tlx_mfma_f32_16x16x16_f16": ("__builtin_amdgcn_mfma_f32_16x16x16f16", "tlx_f16x4", "tlx_f32x4", 16, 16, 16,
                                  ("gfx942", "gfx950")),
    "tlx_mfma_f32_32x32x8_bf16": ("__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "tlx_bf16x4", "tlx_f32x16", 32, 32, 8,
                                  ("gfx942", "gfx950")),
    "tlx_mfma_f32_16x16x16_bf16": ("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "tlx_bf16x4", "tlx_f32x4", 16, 16, 16,
                                   ("gfx942", "gfx950")),
    "tlx_mfma_f32_16x16x32_f16": ("__builtin_amdgcn_mfma_f32_16x16x32_f16", "tlx_f16x8", "tlx_f32x4", 16, 16, 32,
                                  ("gfx950",)),
    "tlx_mfma_f32_32x32x16_f16": ("__builtin_amdgcn_mfma_f32_32x32x16_f16", "tlx_f16x8", "tlx_f32x16", 32, 32, 16,
                                  ("gfx950",)),
    "tlx_mfma_f32_16x16x32_bf16": ("__builtin_amdgcn_mfma_f32_16x16x32_bf16", "tlx_bf16x8", "tlx_f32x4", 16, 16, 32,
                                   ("gfx950",)),
    "tlx_mfma_f32_32x32x16_bf16": ("__builtin_amdgcn_mfma_f32_32x32x16_bf16", "tlx_bf16x8", "tlx_f32x16", 32, 32, 16,
                                   ("gfx950",)),
}
for _name, (_builtin, _ab, _acc, *_shape) in MFMA.items():
    _cast = "__builtin_bit_cast(tlx_bf16x8_native, {})" if _ab == "tlx_bf16x8" else "{}"
    define(_name, f"""
{_INLINE} {_acc} {_name}({_ab} a, {_ab} b, {_acc} c) {{
  return {_builtin}({_cast.format("a")}, {_cast.format("b")}, c, 0, 0, 0);
}}""", "tlx_mfma_types", builtins=(_builtin,))


# fp8 MFMA (tlxc's fp8 types are OCP: float8e4nv = E4M3, float8e5 = E5M2).  The instructions are the
# same on both archs; what their bytes mean is not: gfx950 (CDNA4) reads OCP E4M3 / E5M2, gfx942 (CDNA3)
# reads FNUZ (E4M3 bias 8, E5M2 bias 16, no infinities, 0x80 = NaN).  On gfx942 an OCP byte read as
# FNUZ is its value / 2 (the bias is one larger, the fields the same), so the gfx942 helpers feed the
# OCP bytes (with the codes whose meanings differ remapped: -0 -> +0, NaN / E5M2 inf -> 0x80) to the
# FNUZ instruction with the accumulator divided by 4 and multiply the result by 4: the products are
# a b / 4 exactly and powers of two commute with the rounding, so the result is the OCP product's.
# Operands: 8 bytes per lane (k = 8 (lane / M) .. + 7 of row lane % M of A, column of B).
@helper("tlx_fp8_ocp_as_fnuz", "tlx_mfma_types")
def fp8_ocp_as_fnuz():
    return f"""
{_INLINE} long tlx_fp8_ocp_as_fnuz(tlx_u8x8 v, bool e5m2) {{
  for (int i = 0; i < 8; ++i) {{
    const unsigned char b = v[i];
    v[i] = b == 0x80 ? (unsigned char)0 : (b & 0x7f) >= (e5m2 ? 0x7c : 0x7f) ? (unsigned char)0x80 : b;
  }}
  return __builtin_bit_cast(long, v);
}}"""


FP8_MFMA: dict[str, tuple] = {}    # helper -> (builtin, accumulator type, block, K, A format, B format, archs)
for _block, _k in ((32, 16), (16, 32)):
    _acc = "tlx_f32x16" if _block == 32 else "tlx_f32x4"
    for _fa in ("fp8", "bf8"):
        for _fb in ("fp8", "bf8"):
            _builtin = f"__builtin_amdgcn_mfma_f32_{_block}x{_block}x{_k}_{_fa}_{_fb}"
            _name = f"tlx_mfma_f32_{_block}x{_block}x{_k}_{_fa}_{_fb}"
            FP8_MFMA[_name] = (_builtin, _acc, _block, _k, _fa, _fb, ("gfx950",))
            define(_name, f"""
{_INLINE} {_acc} {_name}(tlx_u8x8 a, tlx_u8x8 b, {_acc} c) {{
  return {_builtin}(__builtin_bit_cast(long, a), __builtin_bit_cast(long, b), c, 0, 0, 0);
}}""", "tlx_mfma_types", builtins=(_builtin,))
            FP8_MFMA[_name + "_fnuz"] = (_builtin, _acc, _block, _k, _fa, _fb, ("gfx942",))
            define(_name + "_fnuz", f"""
{_INLINE} {_acc} {_name}_fnuz(tlx_u8x8 a, tlx_u8x8 b, {_acc} c) {{
  return {_builtin}(tlx_fp8_ocp_as_fnuz(a, {str(_fa == "bf8").lower()}), tlx_fp8_ocp_as_fnuz(b, {str(_fb == "bf8").lower()}),
                    c * 0.25f, 0, 0, 0) * 4.0f;
}}""", "tlx_mfma_types", "tlx_fp8_ocp_as_fnuz", builtins=(_builtin,))


# -- conversions (plain C++: the emulation runs these as written) ---------------------------------
@helper("tlx_f16_to_f32")
def f16_to_f32():
    return f"""
{_INLINE} float tlx_f16_to_f32(unsigned short x) {{ return (float)__builtin_bit_cast(_Float16, x); }}"""


@helper("tlx_f32_to_f16")
def f32_to_f16():
    # round to nearest even (v_cvt_f16_f32)
    return f"""
{_INLINE} unsigned short tlx_f32_to_f16(float x) {{ return __builtin_bit_cast(unsigned short, (_Float16)x); }}"""


@helper("tlx_bf16_to_f32")
def bf16_to_f32():
    return f"""
{_INLINE} float tlx_bf16_to_f32(unsigned short x) {{ return __builtin_bit_cast(float, ((unsigned)x) << 16); }}"""


@helper("tlx_f32_to_bf16")
def f32_to_bf16():
    # round to nearest even; NaN stays a (quiet) NaN
    return f"""
{_INLINE} unsigned short tlx_f32_to_bf16(float x) {{
  unsigned u = __builtin_bit_cast(unsigned, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}}"""


# float -> integer, toward zero, NaN to 0, saturated to the destination's range (as PTX cvt.rzi and the
# interpreter; a C cast is undefined there): plain C++ that the compiler turns into v_cvt_*_f32/f64 and
# selects, the same code on the CPU emulation
_RZI_TYPES = {"s32": ("int", "(-2147483647 - 1)", "2147483647"), "u32": ("unsigned", "0u", "4294967295u"),
              "s64": ("long long", "(-9223372036854775807LL - 1)", "9223372036854775807LL"),
              "u64": ("unsigned long long", "0ull", "18446744073709551615ull")}
for _dst, (_ctype, _lo, _hi) in _RZI_TYPES.items():
    _bits = int(_dst[1:])
    _low = "0.0" if _dst[0] == "u" else f"-{2 ** (_bits - 1)}.0"        # the range's exact float ends
    _high = f"{2 ** _bits}.0" if _dst[0] == "u" else f"{2 ** (_bits - 1)}.0"
    for _src, _ftype in (("f32", "float"), ("f64", "double")):
        define(f"tlx_cvt_rzi_{_dst}_{_src}", f"""
{_INLINE} {_ctype} tlx_cvt_rzi_{_dst}_{_src}({_ftype} x) {{
  if (x != x) return ({_ctype})0;
  if (x <= ({_ftype}){_low}) return {_lo};
  if (x >= ({_ftype}){_high}) return {_hi};
  return ({_ctype})x;
}}""")


# OCP fp8 <-> f32: E4M3 (bias 7, S.1111.111 = NaN, no infinity, max 448) and E5M2 (bias 15, IEEE
# infinities and NaNs, max 57344).  To fp8: round to nearest even, saturating to the largest finite
# value (also infinities: cvt.rn.satfinite, as the CUDA backend and the interpreter), NaN stays NaN.
@helper("tlx_f8e4m3_to_f32")
def f8e4m3_to_f32():
    return f"""
{_INLINE} float tlx_f8e4m3_to_f32(unsigned char b) {{
  const unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if ((b & 0x7fu) == 0x7fu) return __builtin_bit_cast(float, s | 0x7fc00000u);
  if (e == 0) return __builtin_bit_cast(float, s | __builtin_bit_cast(unsigned, (float)m * 0x1p-9f));
  return __builtin_bit_cast(float, s | ((e + 120u) << 23) | (m << 20));
}}"""


@helper("tlx_f8e5m2_to_f32")
def f8e5m2_to_f32():
    return f"""
{_INLINE} float tlx_f8e5m2_to_f32(unsigned char b) {{
  const unsigned s = (unsigned)(b & 0x80u) << 24, e = (b >> 2) & 31u, m = b & 3u;
  if (e == 31u) return __builtin_bit_cast(float, s | 0x7f800000u | (m << 21));
  if (e == 0) return __builtin_bit_cast(float, s | __builtin_bit_cast(unsigned, (float)m * 0x1p-16f));
  return __builtin_bit_cast(float, s | ((e + 112u) << 23) | (m << 21));
}}"""


@helper("tlx_f32_to_f8")
def f32_to_f8():
    # q: |x| in units of the fp8 quantum at its exponent (clamped to the smallest normal one), rounded
    # to even; the code ((e + bias) << mbits) + q - 2^mbits then also covers subnormals (e + bias = 1)
    # and a carry into the next exponent (q = 2^(mbits + 1)).
    return f"""
{_INLINE} unsigned char tlx_f32_to_f8(float x, int mbits, int bias, float maxv, unsigned maxcode) {{
  const unsigned u = __builtin_bit_cast(unsigned, x), s = (u >> 24) & 0x80u;
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned char)(s | 0x7fu);
  const float a = __builtin_fabsf(x);
  if (a >= maxv) return (unsigned char)(s | maxcode);
  int e = (int)((__builtin_bit_cast(unsigned, a) >> 23) & 0xffu) - 127;
  if (e < 1 - bias) e = 1 - bias;
  const unsigned q = (unsigned)__builtin_rintf(__builtin_ldexpf(a, mbits - e));
  return (unsigned char)(s | ((((unsigned)(e + bias)) << mbits) + q - (1u << mbits)));
}}
{_INLINE} unsigned char tlx_f32_to_f8e4m3(float x) {{ return tlx_f32_to_f8(x, 3, 7, 448.0f, 0x7eu); }}
{_INLINE} unsigned char tlx_f32_to_f8e5m2(float x) {{ return tlx_f32_to_f8(x, 2, 15, 57344.0f, 0x7bu); }}"""


# -- global memory: vector accesses (plain C++; the compiler picks global_load/store_dwordxN) -----
def _vector_access(bits: int) -> None:
    words = bits // 32
    vtype = f"tlx_u32x{words}"
    typedef = f"typedef unsigned {vtype} __attribute__((vector_size({4 * words})));" if words > 1 else ""
    outs = ", ".join(f"unsigned& w{k}" for k in range(words))
    ins = ", ".join(f"unsigned w{k}" for k in range(words))
    if words == 1:
        load = "if (pred) w0 = *(const unsigned*)ptr;"
        store = "if (pred) *(unsigned*)ptr = w0;"
    else:
        load = (f"if (pred) {{ {vtype} v = *(const {vtype}*)ptr; "
                + " ".join(f"w{k} = v[{k}];" for k in range(words)) + " }")
        store = (f"if (pred) {{ {vtype} v; " + " ".join(f"v[{k}] = w{k};" for k in range(words))
                 + f" *({vtype}*)ptr = v; }}")
    define(f"tlx_ld_global_b{bits}", f"""
{typedef}
{_INLINE} void tlx_ld_global_b{bits}(const void* ptr, bool pred, {outs}) {{ {load} }}""")
    define(f"tlx_st_global_b{bits}", f"""
{_INLINE} void tlx_st_global_b{bits}(void* ptr, bool pred, {ins}) {{ {store} }}""", f"tlx_ld_global_b{bits}")


for _bits in (32, 64, 128):
    _vector_access(_bits)


# -- LDS: vector accesses (plain C++ on pointers into the kernel's __shared__ array: ds_read/write_bN)
def _lds_access(bits: int) -> None:
    words = bits // 32
    vtype = "unsigned" if words == 1 else f"tlx_u32x{words}"
    outs = ", ".join(f"unsigned& w{k}" for k in range(words))
    ins = ", ".join(f"unsigned w{k}" for k in range(words))
    if words == 1:
        load, store = "w0 = *(const unsigned*)p;", "*(unsigned*)p = w0;"
    else:
        load = f"{vtype} v = *(const {vtype}*)p; " + " ".join(f"w{k} = v[{k}];" for k in range(words))
        store = f"{vtype} v; " + " ".join(f"v[{k}] = w{k};" for k in range(words)) + f" *({vtype}*)p = v;"
    depends = (f"tlx_ld_global_b{bits}",) if words > 1 else ()     # the vector typedef
    define(f"tlx_ld_lds_b{bits}", f"""
{_INLINE} void tlx_ld_lds_b{bits}(const void* p, {outs}) {{ {load} }}""", *depends)
    define(f"tlx_st_lds_b{bits}", f"""
{_INLINE} void tlx_st_lds_b{bits}(void* p, {ins}) {{ {store} }}""", *depends)


for _bits in (32, 64, 128):
    _lds_access(_bits)


# Helpers that only some archs have (the others refuse their instruction): helper -> archs
ONLY_ON: dict[str, tuple[str, ...]] = {"tlx_global_load_lds_b128": ("gfx950",),
                                       **{name: spec[-1] for name, spec in MFMA.items() if spec[-1] != ("gfx942", "gfx950")},
                                       **{name: spec[-1] for name, spec in FP8_MFMA.items()}}


def available_on(arch: str) -> list[str]:
    """The helpers ``arch`` has, in file order."""
    return [name for name in HELPERS if arch in ONLY_ON.get(name, (arch,))]


_FP8_FORMAT = {"f8e4m3": "fp8", "f8e5m2": "bf8"}


def mfma_helper(block: int, k: int, a_element: str, b_element: str | None = None, arch: str = "gfx950") -> str:
    """The helper of the MFMA ``block x block x k`` on ``a_element`` x ``b_element`` inputs ("f16",
    "bf16": both the same; "f8e4m3" / "f8e5m2" in any pair) for ``arch`` (fp8: OCP on gfx950, the FNUZ
    instruction behind the OCP bridge on gfx942)."""
    b_element = b_element or a_element
    if a_element in _FP8_FORMAT and b_element in _FP8_FORMAT:
        name = f"tlx_mfma_f32_{block}x{block}x{k}_{_FP8_FORMAT[a_element]}_{_FP8_FORMAT[b_element]}"
        name += "" if arch == "gfx950" else "_fnuz"
        if name not in FP8_MFMA:
            raise KeyError(name)
        return name
    name = f"tlx_mfma_f32_{block}x{block}x{k}_{a_element}"
    if name not in MFMA or a_element != b_element:
        raise KeyError(name)
    return name


def mfma_vector_types(helper: str) -> tuple[str, str]:
    """(operand vector type, accumulator vector type) of an MFMA helper."""
    if helper in FP8_MFMA:
        return "tlx_u8x8", FP8_MFMA[helper][1]
    return MFMA[helper][1], MFMA[helper][2]


__all__ = ["BUILTINS", "DEPENDS", "FP8_MFMA", "HELPERS", "MFMA", "ONLY_ON", "available_on", "define", "definitions", "helper",
           "mfma_helper", "mfma_vector_types", "swizzle_xor"]
