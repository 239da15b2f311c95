"""Inline-PTX helpers: each instruction lives in exactly one device function
here, which owns its asm string and constraints.  Nobody writes ``asm`` elsewhere.

``HELPERS[name]`` is the C++ definition; ``requires(name)`` lists helpers it
calls.  The CUDA target emits only the helpers a kernel uses, in a fixed order.
"""
from __future__ import annotations

import re

HELPERS: dict[str, str] = {}
DEPENDS: dict[str, tuple[str, ...]] = {}


def define(name: str, text: str, *depends: str) -> None:
    """Register helper ``name`` with its C++ ``text`` and the helpers it calls."""
    if name in HELPERS:
        raise ValueError(f"PTX helper {name} defined twice")
    HELPERS[name] = text.strip("\n")
    DEPENDS[name] = depends


def helper(name: str, *depends: str):
    """Decorator form of ``define`` for a function returning the helper's text."""
    def register(fn):
        define(name, fn(), *depends)
        return fn
    return register


_INLINE = "static __device__ __forceinline__"


# -- conversions ----------------------------------------------------------------------------
@helper("tlx_cvt_f32_f16")
def cvt_f32_f16():
    return f"""
{_INLINE} float tlx_cvt_f32_f16(unsigned short x) {{
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x));
  return r;
}}"""


@helper("tlx_cvt_rn_f16_f32")
def cvt_rn_f16_f32():
    return f"""
{_INLINE} unsigned short tlx_cvt_rn_f16_f32(float x) {{
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}}"""


@helper("tlx_bf16_to_f32")
def bf16_to_f32():
    # bf16 is the upper half of an f32: widening is a shift, exact on every arch.
    return f"""
{_INLINE} float tlx_bf16_to_f32(unsigned short x) {{
  return __uint_as_float(((unsigned)x) << 16);
}}"""


@helper("tlx_cvt_rn_bf16_f32")
def cvt_rn_bf16_f32():
    return f"""
{_INLINE} unsigned short tlx_cvt_rn_bf16_f32(float x) {{
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}}"""


@helper("tlx_cvt_rn_satfinite_e4m3_f32")
def cvt_e4m3_from_f32():
    return f"""
{_INLINE} unsigned char tlx_cvt_rn_satfinite_e4m3_f32(float x) {{
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return (unsigned char)(r & 0xff);
}}"""


@helper("tlx_cvt_rn_satfinite_e5m2_f32")
def cvt_e5m2_from_f32():
    return f"""
{_INLINE} unsigned char tlx_cvt_rn_satfinite_e5m2_f32(float x) {{
  unsigned short r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return (unsigned char)(r & 0xff);
}}"""


def _cvt_fp8x4_from_f32(kind: str) -> str:
    # four floats to four 8-bit codes, b0 in the lowest byte: two cvt of pairs (each puts its
    # first operand in the upper byte)
    return f"""
{_INLINE} unsigned tlx_cvt_rn_satfinite_{kind}x4_f32(float b0, float b1, float b2, float b3) {{
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.{kind}x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b1), "f"(b0));
  asm("cvt.rn.satfinite.{kind}x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(b3), "f"(b2));
  return (unsigned)lo | ((unsigned)hi << 16);
}}"""


for _kind in ("e4m3", "e5m2"):
    define(f"tlx_cvt_rn_satfinite_{_kind}x4_f32", _cvt_fp8x4_from_f32(_kind))


@helper("tlx_exp2_fma_f32")
def exp2_fma_f32():
    # 2^x on the FMA/ALU pipes (tlx.fast_exp2's share, no MUFU): j = round(x) by the 1.5 * 2^23
    # trick, f = x - j in [-0.5, 0.5], 2^f by a degree-3 polynomial (fitted here: relative error
    # <= 7.5e-5), 2^j added to its exponent bits; x < -125 (where that would leave the normal
    # range; -inf too) gives 0, as ex2.approx.ftz does below 2^-126, x >= 128 infinity.  Plain C:
    # no PTX of its own (the CUDA emulation runs it as written).
    return f"""
{_INLINE} float tlx_exp2_fma_f32(float x) {{
  const float t = x + 12582912.0f;
  const int j = __float_as_int(t) - 0x4B400000;
  const float f = x - (t - 12582912.0f);
  const float p = fmaf(fmaf(fmaf(0.05517165363f, f, 0.24261115491f), f, 0.69326096773f), f, 0.99992805719f);
  const float r = __int_as_float(__float_as_int(p) + (j << 23));
  return x < -125.0f ? 0.0f : (x < 128.0f ? r : x + __int_as_float(0x7f800000));   // (NaN stays NaN)
}}"""


@helper("tlx_cvt_f16x2_e4m3x2")
def cvt_f16x2_e4m3x2():
    return f"""
{_INLINE} unsigned tlx_cvt_f16x2_e4m3x2(unsigned short x) {{
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(x));
  return r;
}}"""


@helper("tlx_cvt_f16x2_e5m2x2")
def cvt_f16x2_e5m2x2():
    return f"""
{_INLINE} unsigned tlx_cvt_f16x2_e5m2x2(unsigned short x) {{
  unsigned r;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"(x));
  return r;
}}"""


@helper("tlx_e4m3_to_f32", "tlx_cvt_f16x2_e4m3x2", "tlx_cvt_f32_f16")
def e4m3_to_f32():
    return f"""
{_INLINE} float tlx_e4m3_to_f32(unsigned char x) {{
  return tlx_cvt_f32_f16((unsigned short)(tlx_cvt_f16x2_e4m3x2((unsigned short)x) & 0xffff));
}}"""


@helper("tlx_e5m2_to_f32", "tlx_cvt_f16x2_e5m2x2", "tlx_cvt_f32_f16")
def e5m2_to_f32():
    return f"""
{_INLINE} float tlx_e5m2_to_f32(unsigned char x) {{
  return tlx_cvt_f32_f16((unsigned short)(tlx_cvt_f16x2_e5m2x2((unsigned short)x) & 0xffff));
}}"""


# float -> integer, toward zero: cvt.rzi saturates to the destination's range (a C cast is undefined
# there); codegen_c.c_types.float_to_int clamps 8/16-bit results from the 32-bit one.  NaN gives 0 only
# from f32 to 32 bits on the GPU (H100, session 32: f64 sources and 64-bit results give the type's
# minimum, or 2^31 / 2^63 unsigned), so those helpers test for NaN first
_RZI_REGS = {"s32": ("int", "r"), "u32": ("unsigned", "r"), "s64": ("long long", "l"),
             "u64": ("unsigned long long", "l")}
for _dst, (_ctype, _reg) in _RZI_REGS.items():
    for _src, (_ftype, _freg) in {"f32": ("float", "f"), "f64": ("double", "d")}.items():
        _nan = "" if (_src, _dst[1:]) == ("f32", "32") else f"\n  if (x != x) return ({_ctype})0;"
        define(f"tlx_cvt_rzi_{_dst}_{_src}", f"""
{_INLINE} {_ctype} tlx_cvt_rzi_{_dst}_{_src}({_ftype} x) {{{_nan}
  {_ctype} r;
  asm("cvt.rzi.{_dst}.{_src} %0, %1;" : "={_reg}"(r) : "{_freg}"(x));
  return r;
}}""")


@helper("tlx_cvt_rna_tf32_f32")
def cvt_tf32():
    return f"""
{_INLINE} float tlx_cvt_rna_tf32_f32(float x) {{
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}}"""


@helper("tlx_ex2_approx_ftz_f32")
def ex2_approx_ftz():
    # 2^x as Triton lowers tl.exp2 on f32: one MUFU.EX2, subnormal inputs and results flushed
    # to zero (exp2f would add a compare, a select and two multiplies to keep subnormals).
    return f"""
{_INLINE} float tlx_ex2_approx_ftz_f32(float x) {{
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}}"""


@helper("tlx_div_full_f32")
def div_full():
    # x / y on f32 as Triton lowers it (arith.divf): div.full.f32, at most 2 ulps over the
    # whole range, subnormals kept.  IEEE div.rn.f32 makes ptxas branch to a slow-path
    # subroutine per division; each call ends a block, and everything the scheduler hoists
    # above it stays live (a SwiGLU row kernel: 114 registers instead of 46).
    return f"""
{_INLINE} float tlx_div_full_f32(float x, float y) {{
  float r;
  asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(y));
  return r;
}}"""


@helper("tlx_sqrt_approx_f32")
def sqrt_approx():
    # tl.sqrt on f32 as Triton lowers it, without .ftz (a subnormal keeps its square root);
    # sqrt.rn.f32 has the same slow-path call as div.rn.f32.  tl.sqrt_rn stays exact.
    return f"""
{_INLINE} float tlx_sqrt_approx_f32(float x) {{
  float r;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}}"""


@helper("tlx_bitcast")
def bitcast():
    return """
template <typename To, typename From>
static __device__ __forceinline__ To tlx_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  To r;
  memcpy(&r, &x, sizeof(To));
  return r;
}"""


# -- global memory -------------------------------------------------------------------------
def _ld(name: str, words: int):
    outs = ", ".join(f"%{i}" for i in range(words))
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    regs = "{" + outs + "}" if words > 1 else outs
    params = ", ".join(f"unsigned& w{i}" for i in range(words))
    constraints = ", ".join(f'"+r"(w{i})' for i in range(words))
    return f"""
{_INLINE} void {name}(const void* p, bool pred, {params}) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{words + 1}, 0;\\n @p ld.global.{vec} {regs}, [%{words}];\\n}}"
               : {constraints} : "l"(p), "r"((int)pred));
}}"""


def _st(name: str, words: int):
    ins = ", ".join(f"%{i + 1}" for i in range(words))
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    regs = "{" + ins + "}" if words > 1 else ins
    params = ", ".join(f"unsigned w{i}" for i in range(words))
    constraints = ", ".join(f'"r"(w{i})' for i in range(words))
    return f"""
{_INLINE} void {name}(void* p, bool pred, {params}) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{words + 1}, 0;\\n @p st.global.{vec} [%0], {regs};\\n}}"
               :: "l"(p), {constraints}, "r"((int)pred) : "memory");
}}"""


for _words, _bits in ((1, 32), (2, 64), (4, 128)):
    define(f"tlx_ld_global_b{_bits}", _ld(f"tlx_ld_global_b{_bits}", _words))
    define(f"tlx_st_global_b{_bits}", _st(f"tlx_st_global_b{_bits}", _words))


# -- cache hints on global loads and stores ------------------------------------------------
# tl.load / tl.store with cache_modifier= or eviction_policy= (Triton's spellings;
# docs/codegen.md, "Cache hints").  The cache operator and the eviction policy are template
# parameters of one helper per access width: indices into these tables, so that every
# spelling lives here.  Triton lowers evict_first/evict_last to an L1 eviction priority
# plus an L2 policy from createpolicy (``.L1::evict_first.L2::cache_hint``); PTX takes no
# L1 priority next to a cache operator (ptxas rejects ``ld.global.cg.L1::evict_first``), so
# with one the L2 policy alone carries the hint.  ld.volatile takes neither (the frontend
# refuses the mix).
LD_CACHE_OPS = ("", "ca", "cg", "cv")
ST_CACHE_OPS = ("", "wb", "cg", "cs", "wt")
EVICTIONS = ("", "evict_first", "evict_last")
HINT_BITS = (8, 16, 32, 64, 128)


def access_qualifiers(cache: str, evict: str) -> str:
    """The qualifiers after ``ld.global`` / ``st.global``: ``.cg``, ``.L1::evict_first.L2::cache_hint``..."""
    text = f".{cache}" if cache else ""
    if evict:
        text += ("" if cache else f".L1::{evict}") + ".L2::cache_hint"
    return text


@helper("tlx_l2_policy")
def l2_policy():
    first, last = (f'asm("createpolicy.fractional.L2::{evict}.b64 %0, 1.0;" : "=l"(policy));'
                   for evict in EVICTIONS[1:])
    return f"""
// An L2 cache policy giving the accesses that carry it the priority EVICTIONS[EVICT].
template <int EVICT>
{_INLINE} unsigned long long tlx_l2_policy() {{
  static_assert(EVICT == 1 || EVICT == 2, "an L2 policy is evict_first (1) or evict_last (2)");
  unsigned long long policy;
  if constexpr (EVICT == 1)
    {first}
  else
    {last}
  return policy;
}}"""


def _access_shape(bits: int):
    """(PTX type, inline-asm constraint, C type of a word, number of words) of a ``bits`` access."""
    if bits < 32:
        return f"u{bits}", "h", "unsigned short", 1
    words = bits // 32
    return {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words], "r", "unsigned", words


def _hinted_branches(instruction, cache_ops) -> str:
    """``if constexpr`` branches over every (cache operator, eviction) pair; ``instruction(q, policy)``
    renders the asm statement with qualifiers ``q`` (and an L2 policy operand when ``policy``)."""
    branches = []
    for c, cache in enumerate(cache_ops):
        for e, evict in enumerate(EVICTIONS):
            keyword = "if constexpr" if not branches else "else if constexpr"
            statement = instruction(access_qualifiers(cache, evict), bool(evict))
            if evict:
                statement = f"{{ unsigned long long policy = tlx_l2_policy<{e}>(); {statement} }}"
            branches.append(f"  {keyword} (CACHE == {c} && EVICT == {e})\n    {statement}")
    return "\n".join(branches)


def _ld_hint(bits: int) -> str:
    vec, c, ctype, words = _access_shape(bits)
    outs = ", ".join(f"%{i}" for i in range(words))
    regs = "{" + outs + "}" if words > 1 else outs
    params = ", ".join(f"{ctype}& w{i}" for i in range(words))
    constraints = ", ".join(f'"+{c}"(w{i})' for i in range(words))

    def instruction(q, policy):
        operand, extra = (f", %{words + 2}", ', "l"(policy)') if policy else ("", "")
        return (f'asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{words + 1}, 0;\\n '
                f'@p ld.global{q}.{vec} {regs}, [%{words}]{operand};\\n}}" '
                f': {constraints} : "l"(p), "r"((int)pred){extra});')
    return f"""
// ld.global with LD_CACHE_OPS[CACHE] and EVICTIONS[EVICT]; a false pred keeps the words.
template <int CACHE, int EVICT>
{_INLINE} void tlx_ld_global_hint_b{bits}(const void* p, bool pred, {params}) {{
{_hinted_branches(instruction, LD_CACHE_OPS)}
}}"""


def _st_hint(bits: int) -> str:
    vec, c, ctype, words = _access_shape(bits)
    ins = ", ".join(f"%{i + 1}" for i in range(words))
    regs = "{" + ins + "}" if words > 1 else ins
    params = ", ".join(f"{ctype} w{i}" for i in range(words))
    constraints = ", ".join(f'"{c}"(w{i})' for i in range(words))

    def instruction(q, policy):
        operand, extra = (f", %{words + 2}", ', "l"(policy)') if policy else ("", "")
        return (f'asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{words + 1}, 0;\\n '
                f'@p st.global{q}.{vec} [%0], {regs}{operand};\\n}}" '
                f':: "l"(p), {constraints}, "r"((int)pred){extra} : "memory");')
    return f"""
// st.global with ST_CACHE_OPS[CACHE] and EVICTIONS[EVICT], where pred holds.
template <int CACHE, int EVICT>
{_INLINE} void tlx_st_global_hint_b{bits}(void* p, bool pred, {params}) {{
{_hinted_branches(instruction, ST_CACHE_OPS)}
}}"""


def _ld_volatile(bits: int) -> str:
    vec, c, ctype, words = _access_shape(bits)
    outs = ", ".join(f"%{i}" for i in range(words))
    regs = "{" + outs + "}" if words > 1 else outs
    params = ", ".join(f"{ctype}& w{i}" for i in range(words))
    constraints = ", ".join(f'"+{c}"(w{i})' for i in range(words))
    # "memory": a volatile load is how a kernel polls a flag; no access may move across it
    return f"""
{_INLINE} void tlx_ld_volatile_global_b{bits}(const void* p, bool pred, {params}) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{words + 1}, 0;\\n @p ld.volatile.global.{vec} {regs}, [%{words}];\\n}}"
               : {constraints} : "l"(p), "r"((int)pred) : "memory");
}}"""


for _bits in HINT_BITS:
    define(f"tlx_ld_global_hint_b{_bits}", _ld_hint(_bits), "tlx_l2_policy")
    define(f"tlx_st_global_hint_b{_bits}", _st_hint(_bits), "tlx_l2_policy")
    define(f"tlx_ld_volatile_global_b{_bits}", _ld_volatile(_bits))


# -- atomics -------------------------------------------------------------------------------
# One helper per atom instruction (operation and type).  The memory semantics and
# the scope are template parameters (indices into ATOM_SEMS / ATOM_SCOPES) that pick
# one of the twelve spellings at compile time, so every spelling still lives here.
ATOM_SEMS = ("relaxed", "acquire", "release", "acq_rel")
ATOM_SCOPES = ("cta", "gpu", "sys")
# PTX type -> (C type of the operands, inline-asm constraint)
ATOM_TYPES = {"u32": ("unsigned", "r"), "s32": ("int", "r"), "b32": ("unsigned", "r"), "f32": ("float", "f"),
              "u64": ("unsigned long long", "l"), "s64": ("long long", "l"), "b64": ("unsigned long long", "l"),
              "f64": ("double", "d"), "b16": ("unsigned short", "h"), "f16": ("unsigned short", "h"),
              "bf16": ("unsigned short", "h")}
# operation -> the PTX types it has (add.f16/bf16 are spelled add.noftz)
ATOM_OPS = {"add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
            "min": ("u32", "s32", "u64", "s64"), "max": ("u32", "s32", "u64", "s64"),
            "and": ("b32", "b64"), "or": ("b32", "b64"), "xor": ("b32", "b64"),
            "exch": ("b32", "b64"), "cas": ("b16", "b32", "b64")}


def atom_name(op: str, ptx_type: str) -> str:
    return f"tlx_atom_{op}_{ptx_type}"


def atom_instruction(op: str, ptx_type: str, sem: str, scope: str) -> str:
    """``atom.<sem>.<scope>.global.<op>.<type>``: the PTX ISA's order of qualifiers."""
    spelled = "add.noftz" if op == "add" and ptx_type in ("f16", "bf16") else op
    return f"atom.{sem}.{scope}.global.{spelled}.{ptx_type}"


def _atom(op: str, ptx_type: str) -> str:
    ctype, c = ATOM_TYPES[ptx_type]
    name = atom_name(op, ptx_type)
    cas = op == "cas"
    params = f"void* p, {ctype} cmp, {ctype} v" if cas else f"void* p, {ctype} v"
    operands = "%0, [%1], %2, %3" if cas else "%0, [%1], %2"
    inputs = f'"l"(p), "{c}"(cmp), "{c}"(v)' if cas else f'"l"(p), "{c}"(v)'
    branches = []
    for i, sem in enumerate(ATOM_SEMS):
        for j, scope in enumerate(ATOM_SCOPES):
            keyword = "if constexpr" if not branches else "else if constexpr"
            branches.append(f'  {keyword} (SEM == {i} && SCOPE == {j})\n'
                            f'    asm volatile("{atom_instruction(op, ptx_type, sem, scope)} {operands};"'
                            f' : "={c}"(r) : {inputs} : "memory");')
    body = "\n".join(branches)
    return f"""
template <int SEM, int SCOPE>
{_INLINE} {ctype} {name}({params}) {{
  {ctype} r;
{body}
  return r;
}}"""


for _op, _types in ATOM_OPS.items():
    for _type in _types:
        define(atom_name(_op, _type), _atom(_op, _type))


# -- tensor cores ----------------------------------------------------------------------------
def _mma(dtype: str):
    return f"""
{_INLINE} void tlx_mma_m16n8k16_f32_{dtype}(float* d, const unsigned short* a, const unsigned short* b) {{
  const unsigned a0 = a[0] | ((unsigned)a[1] << 16), a1 = a[2] | ((unsigned)a[3] << 16);
  const unsigned a2 = a[4] | ((unsigned)a[5] << 16), a3 = a[6] | ((unsigned)a[7] << 16);
  const unsigned b0 = b[0] | ((unsigned)b[1] << 16), b1 = b[2] | ((unsigned)b[3] << 16);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32 "
               "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}}"""


define("tlx_mma_m16n8k16_f32_bf16", _mma("bf16"))
define("tlx_mma_m16n8k16_f32_f16", _mma("f16"))


def _mma_word_operands(name: str, instruction: str, acc: str, acc_letter: str, operand: str, word) -> str:
    """An ``mma.sync`` whose A and B fragments are four and two 32-bit words: tf32 (a float each) and
    s8 (four int8 packed in each, by the caller); ``word`` gives the "r" operand of an element."""
    a_words = ", ".join(f'"r"({word(f"a[{i}]")})' for i in range(4))
    b_words = ", ".join(f'"r"({word(f"b[{i}]")})' for i in range(2))
    return f"""
{_INLINE} void {name}({acc}* d, const {operand}* a, const {operand}* b) {{
  asm volatile("{instruction} "
               "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
               : "+{acc_letter}"(d[0]), "+{acc_letter}"(d[1]), "+{acc_letter}"(d[2]), "+{acc_letter}"(d[3])
               : {a_words},
                 {b_words});
}}"""


define("tlx_mma_m16n8k8_f32_tf32", _mma_word_operands(
    "tlx_mma_m16n8k8_f32_tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "float", "f", "float",
    lambda e: f"__float_as_uint({e})"))
define("tlx_mma_m16n8k32_s32_s8", _mma_word_operands(
    "tlx_mma_m16n8k32_s32_s8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "int", "r", "unsigned",
    lambda e: e))


# -- shared memory, mbarriers, named barriers, fences ----------------------------------------
@helper("tlx_smem_addr")
def smem_addr():
    # The intrinsic, not a ``cvta.to.shared`` asm: NVVM then sees that a buffer or barrier
    # pointer is the shared array plus an offset and computes the address in 32 bits (no
    # 64-bit generic arithmetic on the per-step paths; docs/performance.md, sixth session).
    return f"""
{_INLINE} unsigned tlx_smem_addr(const void* p) {{
  return (unsigned)__cvta_generic_to_shared(p);
}}"""


@helper("tlx_mbarrier_init", "tlx_smem_addr")
def mbarrier_init():
    return f"""
{_INLINE} void tlx_mbarrier_init(unsigned long long* bar, unsigned count) {{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(tlx_smem_addr(bar)), "r"(count) : "memory");
}}"""


@helper("tlx_mbarrier_try_wait_parity", "tlx_smem_addr")
def mbarrier_try_wait_parity():
    return f"""
{_INLINE} bool tlx_mbarrier_try_wait_parity(unsigned long long* bar, unsigned phase) {{
  unsigned ok;
  asm volatile("{{\\n .reg .pred p;\\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n selp.u32 %0, 1, 0, p;\\n}}"
               : "=r"(ok) : "r"(tlx_smem_addr(bar)), "r"(phase) : "memory");
  return ok != 0;
}}"""


@helper("tlx_mbarrier_try_wait_parity_suspend", "tlx_smem_addr")
def mbarrier_try_wait_parity_suspend():
    # the four-operand form: the thread may be suspended up to suspend_ns for the phase to complete
    return f"""
{_INLINE} bool tlx_mbarrier_try_wait_parity_suspend(unsigned long long* bar, unsigned phase, unsigned suspend_ns) {{
  unsigned ok;
  asm volatile("{{\\n .reg .pred p;\\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\\n selp.u32 %0, 1, 0, p;\\n}}"
               : "=r"(ok) : "r"(tlx_smem_addr(bar)), "r"(phase), "r"(suspend_ns) : "memory");
  return ok != 0;
}}"""


@helper("tlx_mbarrier_wait", "tlx_mbarrier_try_wait_parity")
def mbarrier_wait():
    # try_wait suspends the thread for a hardware-chosen time, so the loop does not hot-spin.
    return f"""
{_INLINE} void tlx_mbarrier_wait(unsigned long long* bar, unsigned phase) {{
  while (!tlx_mbarrier_try_wait_parity(bar, phase)) {{
  }}
}}"""


@helper("tlx_mbarrier_wait_suspend", "tlx_mbarrier_try_wait_parity_suspend")
def mbarrier_wait_suspend():
    # tlx.async_tasks(mbarrier_try_wait_suspend_ns=N): each try_wait may suspend the thread up to N ns
    return f"""
{_INLINE} void tlx_mbarrier_wait_suspend(unsigned long long* bar, unsigned phase, unsigned suspend_ns) {{
  while (!tlx_mbarrier_try_wait_parity_suspend(bar, phase, suspend_ns)) {{
  }}
}}"""


@helper("tlx_globaltimer")
def globaltimer():
    return f"""
{_INLINE} unsigned long long tlx_globaltimer() {{
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}}"""


@helper("tlx_mbarrier_wait_watchdog", "tlx_mbarrier_try_wait_parity", "tlx_mbarrier_try_wait_parity_suspend",
        "tlx_globaltimer")
def mbarrier_wait_watchdog():
    # TLXC_DEBUG_BARRIERS=1 builds: a wait that outlives its budget reports where it is stuck and traps.
    return """
static __device__ __forceinline__ void tlx_mbarrier_wait_watchdog(unsigned long long* bar, unsigned phase,
    unsigned suspend_ns, unsigned long long budget_ns, const char* where, const char* task, const char* barrier,
    int index) {
  const unsigned long long start = tlx_globaltimer();
  while (!(suspend_ns ? tlx_mbarrier_try_wait_parity_suspend(bar, phase, suspend_ns)
                      : tlx_mbarrier_try_wait_parity(bar, phase))) {
    if (tlx_globaltimer() - start > budget_ns) {
      if ((threadIdx.x & 31) == 0)
        printf("tlxc watchdog: block (%d, %d, %d) warp %d, task '%s', is stuck at %s waiting for phase %u of "
               "barrier %s[%d] (more than %llu ms)\\n", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x / 32,
               task, where, phase & 1, barrier, index, budget_ns / 1000000ull);
      __trap();
    }
  }
}"""


@helper("tlx_mbarrier_arrive", "tlx_smem_addr")
def mbarrier_arrive():
    return f"""
{_INLINE} void tlx_mbarrier_arrive(unsigned long long* bar, unsigned count) {{
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0], %1;"
               :: "r"(tlx_smem_addr(bar)), "r"(count) : "memory");
}}"""


# -- clusters -------------------------------------------------------------------------------
@helper("tlx_cluster_ctarank")
def cluster_ctarank():
    return f"""
{_INLINE} int tlx_cluster_ctarank() {{
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return (int)rank;
}}"""


@helper("tlx_cluster_nctarank")
def cluster_nctarank():
    return f"""
{_INLINE} int tlx_cluster_nctarank() {{
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return (int)n;
}}"""


@helper("tlx_cluster_arrive")
def cluster_arrive():
    return f"""
{_INLINE} void tlx_cluster_arrive() {{
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}}"""


@helper("tlx_cluster_wait")
def cluster_wait():
    return f"""
{_INLINE} void tlx_cluster_wait() {{
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}}"""


@helper("tlx_fence_mbarrier_init_cluster")
def fence_mbarrier_init_cluster():
    return f"""
{_INLINE} void tlx_fence_mbarrier_init_cluster() {{
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}}"""


@helper("tlx_mapa_shared", "tlx_smem_addr")
def mapa_shared():
    return f"""
{_INLINE} unsigned tlx_mapa_shared(const void* local, int rank) {{
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(tlx_smem_addr(local)), "r"(rank));
  return remote;
}}"""


@helper("tlx_mbarrier_arrive_cluster")
def mbarrier_arrive_cluster():
    # The default semantics (release at CTA scope), as CUTLASS's cluster barriers use: a
    # remote arrive hands a stage back after reads that have completed (wgmma waited for),
    # so no data needs publishing at cluster scope.  The .release.cluster form cost 30% of
    # the paired GEMM on the H200 (docs/performance.md).
    return f"""
{_INLINE} void tlx_mbarrier_arrive_cluster(unsigned remote_bar, unsigned count) {{
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0], %1;"
               :: "r"(remote_bar), "r"(count) : "memory");
}}"""


# -- distributed shared memory (rules_cluster.py): addresses in the cluster window (mapa) ------
_CLUSTER_STORE_TYPES = {8: ("unsigned char", "b8", "h"), 16: ("unsigned short", "b16", "h"),
                        32: ("unsigned", "b32", "r"), 64: ("unsigned long long", "b64", "l")}


def _st_shared_cluster(bits: int) -> str:
    ctype, ptx_type, letter = _CLUSTER_STORE_TYPES[bits]
    value = "(unsigned short)v" if bits == 8 else "v"      # PTX has no 8-bit register operands
    return f"""
{_INLINE} void tlx_st_shared_cluster_b{bits}(unsigned remote, {ctype} v) {{
  asm volatile("st.shared::cluster.{ptx_type} [%0], %1;" :: "r"(remote), "{letter}"({value}) : "memory");
}}"""


for _bits in (8, 16, 32, 64):
    define(f"tlx_st_shared_cluster_b{_bits}", _st_shared_cluster(_bits))


def _st_async_cluster(bits: int) -> str:
    ctype, ptx_type, letter = _CLUSTER_STORE_TYPES[bits]
    return f"""
{_INLINE} void tlx_st_async_cluster_b{bits}(unsigned remote, {ctype} v, unsigned remote_bar) {{
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.{ptx_type} [%0], %1, [%2];"
               :: "r"(remote), "{letter}"(v), "r"(remote_bar) : "memory");
}}"""


for _bits in (32, 64):                   # st.async stores .b32/.b64 (and vectors of them) only
    define(f"tlx_st_async_cluster_b{_bits}", _st_async_cluster(_bits))


@helper("tlx_cp_async_bulk_cluster", "tlx_smem_addr")
def cp_async_bulk_cluster():
    return f"""
{_INLINE} void tlx_cp_async_bulk_cluster(unsigned remote_dst, const void* src, unsigned bytes,
                                          unsigned remote_bar) {{
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(remote_dst), "r"(tlx_smem_addr(src)), "r"(bytes), "r"(remote_bar) : "memory");
}}"""


# -- warp votes (rules_warp.py) ----------------------------------------------------------------
@helper("tlx_vote_ballot_sync")
def vote_ballot_sync():
    return f"""
{_INLINE} unsigned tlx_vote_ballot_sync(unsigned mask, bool pred) {{
  unsigned ballot;
  asm volatile("{{ .reg .pred p; setp.ne.u32 p, %1, 0; vote.sync.ballot.b32 %0, p, %2; }}"
               : "=r"(ballot) : "r"((unsigned)pred), "r"(mask));
  return ballot;
}}"""


# -- user inline PTX (tl.inline_asm_elementwise, rules_warp.py) --------------------------------
def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _cuda_operands(asm: str) -> str:
    """Triton's operand syntax (``$0``, ``$1``... as LLVM) in CUDA's: ``%0``; a literal ``%``
    (``%tid.x``, ``%r1``) becomes ``%%``."""
    out, i = [], 0
    while i < len(asm):
        ch = asm[i]
        if ch == "%":
            out.append("%%")
        elif ch == "$" and i + 1 < len(asm) and asm[i + 1].isdigit():
            j = i + 1
            while j < len(asm) and asm[j].isdigit():
                j += 1
            out.append("%" + asm[i + 1:j])
            i = j
            continue
        elif ch == "$" and asm[i + 1:i + 2] == "$":
            out.append("$")
            i += 2
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def user_inline_asm(asm: str, outputs: list[tuple[str, str]], inputs: list[tuple[str, str]],
                    volatile: bool) -> str:
    """The one place where user assembly enters generated code: the ``asm`` statement of a
    ``tl.inline_asm_elementwise``.  ``outputs`` / ``inputs`` are (constraint, C expression)
    pairs in operand order (``"=r"``, lvalue; ``"r"``, value); ``volatile`` for
    ``is_pure=False`` (the asm has effects, or must not be merged)."""
    outs = ", ".join(f'"{c}"({e})' for c, e in outputs)
    ins = ", ".join(f'"{c}"({e})' for c, e in inputs)
    keyword = "asm volatile" if volatile else "asm"
    clauses = f" : {outs}" + (f" : {ins}" if ins else "")
    return f"{keyword}({_c_string(_cuda_operands(asm))}{clauses});"


# What ``user_inline_asm`` renders for a one-instruction asm of one operand in and one out,
# ``asm("op %0, %1;" : "=c"(out) : "c"(arg));`` (c: r or f): the CPU emulation reads these back
# (codegen_nvptx/emu/run.py) to run the instructions it knows as host C.
USER_ASM_UNARY = re.compile(r'asm(?: volatile)?\("(?P<op>[\w.]+) %0, %1;" : "=(?P<c>[rf])"\((?P<out>.+?)\) : '
                            r'"(?P=c)"\((?P<arg>.+?)\)\);')


@helper("tlx_mbarrier_complete_tx", "tlx_smem_addr")
def mbarrier_complete_tx():
    # Completes ``bytes`` transaction bytes without an arrival: what a copy's landing does
    # (tlx.barrier_complete_tx: the bytes of a box that threads stored themselves).
    return f"""
{_INLINE} void tlx_mbarrier_complete_tx(unsigned long long* bar, unsigned bytes) {{
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
               :: "r"(tlx_smem_addr(bar)), "r"(bytes) : "memory");
}}"""


@helper("tlx_mbarrier_arrive_expect_tx", "tlx_smem_addr")
def mbarrier_arrive_expect_tx():
    return f"""
{_INLINE} void tlx_mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {{
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;"
               :: "r"(tlx_smem_addr(bar)), "r"(bytes) : "memory");
}}"""


@helper("tlx_bar_sync")
def bar_sync():
    return f"""
{_INLINE} void tlx_bar_sync(unsigned id, unsigned threads) {{
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}}"""


@helper("tlx_bar_arrive")
def bar_arrive():
    return f"""
{_INLINE} void tlx_bar_arrive(unsigned id, unsigned threads) {{
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}}"""


@helper("tlx_fence_proxy_async_shared_cta")
def fence_proxy_async():
    return f"""
{_INLINE} void tlx_fence_proxy_async_shared_cta() {{
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}}"""


@helper("tlx_fence_acq_rel_gpu")
def fence_gpu():
    return f"""
{_INLINE} void tlx_fence_acq_rel_gpu() {{
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}}"""


@helper("tlx_fence_acq_rel_sys")
def fence_sys():
    return f"""
{_INLINE} void tlx_fence_acq_rel_sys() {{
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}}"""


# -- programmatic dependent launch (sm_90+; tl.extra.cuda.gdc_*) --------------------------------
@helper("tlx_griddepcontrol_wait")
def griddepcontrol_wait():
    # waits until the grids this one depends on (launch_pdl=True) completed and their memory
    # is visible; without a dependency it returns at once.  "memory": no access moves above it.
    return f"""
{_INLINE} void tlx_griddepcontrol_wait() {{
  asm volatile("griddepcontrol.wait;" ::: "memory");
}}"""


@helper("tlx_griddepcontrol_launch_dependents")
def griddepcontrol_launch_dependents():
    # lets the next PDL-launched grid start early; orders no memory (gdc_wait does that).
    return f"""
{_INLINE} void tlx_griddepcontrol_launch_dependents() {{
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}}"""


# -- cp.async -----------------------------------------------------------------------------
def _cp_async(nbytes: int):
    cache = "cg" if nbytes == 16 else "ca"   # .cg (L2 only) exists for 16-byte copies only
    return f"""
{_INLINE} void tlx_cp_async_{nbytes}(void* dst, const void* src, bool pred) {{
  asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;"
               :: "r"(tlx_smem_addr(dst)), "l"(src), "r"(pred ? {nbytes} : 0) : "memory");
}}"""


for _n in (4, 8, 16):
    define(f"tlx_cp_async_{_n}", _cp_async(_n), "tlx_smem_addr")


# cp.async with tlx.async_load's cache_modifier=: CP_ASYNC_CACHE_OPS[CACHE] (.cg, L2 only, exists for
# 16-byte copies only).  No L2::cache_hint form: ptxas can encode it illegally (rules_tlx._cp_async_hints).
CP_ASYNC_CACHE_OPS = ("ca", "cg")


def _cp_async_hint(nbytes: int):
    branches = []
    for c, cache in enumerate(CP_ASYNC_CACHE_OPS if nbytes == 16 else CP_ASYNC_CACHE_OPS[:1]):
        keyword = "if constexpr" if not branches else "else if constexpr"
        branches.append(f'  {keyword} (CACHE == {c})\n'
                        f'    asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;"\n'
                        f'                 :: "r"(tlx_smem_addr(dst)), "l"(src), "r"(pred ? {nbytes} : 0) : "memory");')
    only_ca = "" if nbytes == 16 else f'\n  static_assert(CACHE == 0, "cp.async.cg copies 16 bytes, not {nbytes}");'
    body = "\n".join(branches)
    return f"""
template <int CACHE>
{_INLINE} void tlx_cp_async_hint_{nbytes}(void* dst, const void* src, bool pred) {{{only_ca}
{body}
}}"""


for _n in (4, 8, 16):
    define(f"tlx_cp_async_hint_{_n}", _cp_async_hint(_n), "tlx_smem_addr")


def _ld_shared(bits: int):
    words = bits // 32
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    outs = ", ".join(f"%{i}" for i in range(words))
    regs = "{" + outs + "}" if words > 1 else outs
    params = ", ".join(f"unsigned& w{i}" for i in range(words))
    constraints = ", ".join(f'"=r"(w{i})' for i in range(words))
    return f"""
{_INLINE} void tlx_ld_shared_b{bits}(const void* p, {params}) {{
  asm volatile("ld.shared.{vec} {regs}, [%{words}];" : {constraints} : "r"(tlx_smem_addr(p)) : "memory");
}}"""


def _st_shared(bits: int):
    words = bits // 32
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    ins = ", ".join(f"%{i + 1}" for i in range(words))
    regs = "{" + ins + "}" if words > 1 else ins
    params = ", ".join(f"unsigned w{i}" for i in range(words))
    constraints = ", ".join(f'"r"(w{i})' for i in range(words))
    return f"""
{_INLINE} void tlx_st_shared_b{bits}(void* p, {params}) {{
  asm volatile("st.shared.{vec} [%0], {regs};" :: "r"(tlx_smem_addr(p)), {constraints} : "memory");
}}"""


for _bits in (32, 64, 128):
    define(f"tlx_ld_shared_b{_bits}", _ld_shared(_bits), "tlx_smem_addr")
    define(f"tlx_st_shared_b{_bits}", _st_shared(_bits), "tlx_smem_addr")


def _ldmatrix(trans: bool):
    suffix = ".trans" if trans else ""
    return f"""
{_INLINE} void tlx_ldmatrix_x4{suffix.replace('.', '_')}(const void* p, unsigned& w0, unsigned& w1, unsigned& w2,
                                                         unsigned& w3) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 {{%0, %1, %2, %3}}, [%4];"
               : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(tlx_smem_addr(p)) : "memory");
}}"""


# ldmatrix (sm_75+): four 8x8 b16 matrices, lanes 8j..8j+7 giving the 16-byte rows of matrix j;
# word j of lane t holds row t/4, columns 2(t%4), 2(t%4)+1 of matrix j (.trans: column t/4, rows).
define("tlx_ldmatrix_x4", _ldmatrix(False), "tlx_smem_addr")
define("tlx_ldmatrix_x4_trans", _ldmatrix(True), "tlx_smem_addr")


@helper("tlx_cp_async_commit_group")
def cp_async_commit():
    return f"""
{_INLINE} void tlx_cp_async_commit_group() {{
  asm volatile("cp.async.commit_group;" ::: "memory");
}}"""


@helper("tlx_cp_async_wait_group")
def cp_async_wait():
    return """
template <int N>
static __device__ __forceinline__ void tlx_cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}"""


# -- TMA ----------------------------------------------------------------------------------
def _coords(rank: int, first: int) -> str:
    return "{" + ", ".join(f"%{first + i}" for i in range(rank)) + "}"


def _tma_load(rank: int):
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return f"""
{_INLINE} void tlx_tma_load_{rank}d(void* dst, const void* tensormap, unsigned long long* bar, {params}) {{
  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {_coords(rank, 3)}], [%2];"
               :: "r"(tlx_smem_addr(dst)), "l"(tensormap), "r"(tlx_smem_addr(bar)), {coords} : "memory");
}}"""


def _tma_store(rank: int):
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return f"""
{_INLINE} void tlx_tma_store_{rank}d(const void* tensormap, const void* src, {params}) {{
  asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%0, {_coords(rank, 2)}], [%1];"
               :: "l"(tensormap), "r"(tlx_smem_addr(src)), {coords} : "memory");
}}"""


# The reductions of cp.reduce.async.bulk.tensor; which element types each takes is the
# IR's rule (ir/ops/shared.py: TMA_REDUCE_TYPES): the instruction reads it from the tensor map.
TMA_REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


def _tma_reduce(kind: str, rank: int):
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return f"""
{_INLINE} void tlx_tma_reduce_{kind}_{rank}d(const void* tensormap, const void* src, {params}) {{
  asm volatile("cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{kind}.tile.bulk_group "
               "[%0, {_coords(rank, 2)}], [%1];"
               :: "l"(tensormap), "r"(tlx_smem_addr(src)), {coords} : "memory");
}}"""


def _tma_load_multicast(rank: int):
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return f"""
{_INLINE} void tlx_tma_load_multicast_{rank}d(void* dst, const void* tensormap, unsigned long long* bar,
                                              unsigned short cta_mask, {params}) {{
  asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
               "[%0], [%1, {_coords(rank, 4)}], [%2], %3;"
               :: "r"(tlx_smem_addr(dst)), "l"(tensormap), "r"(tlx_smem_addr(bar)), "h"(cta_mask), {coords}
               : "memory");
}}"""


def _tma_prefetch(rank: int):
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return f"""
{_INLINE} void tlx_tma_prefetch_{rank}d(const void* tensormap, {params}) {{
  asm volatile("cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile [%0, {_coords(rank, 1)}];"
               :: "l"(tensormap), {coords} : "memory");
}}"""


for _rank in range(1, 6):
    define(f"tlx_tma_prefetch_{_rank}d", _tma_prefetch(_rank))
    define(f"tlx_tma_load_{_rank}d", _tma_load(_rank), "tlx_smem_addr")
    define(f"tlx_tma_load_multicast_{_rank}d", _tma_load_multicast(_rank), "tlx_smem_addr")
    define(f"tlx_tma_store_{_rank}d", _tma_store(_rank), "tlx_smem_addr")
    for _kind in TMA_REDUCE_OPS:
        define(f"tlx_tma_reduce_{_kind}_{_rank}d", _tma_reduce(_kind, _rank), "tlx_smem_addr")


# TMA copies with eviction_policy=: the same instructions with ``.L2::cache_hint`` and an L2
# policy of EVICTIONS[EVICT] as their last operand (PTX ISA, cp.async.bulk.tensor).  A TMA
# copy has no cache operator: it moves data between global and shared memory through L2.
def _tma_hinted(name: str, template: str, params: str, instruction: str, operands: str, inputs: str) -> str:
    return f"""
template <{template}>
{_INLINE} void {name}({params}) {{
  asm volatile("{instruction}.L2::cache_hint {operands};"
               :: {inputs}, "l"(tlx_l2_policy<EVICT>()) : "memory");
}}"""


def _tma_hint_parts(rank: int, first: int) -> tuple[str, str, str]:
    """(coordinate parameters, their inputs, the policy's operand) of a copy whose coordinates start at ``first``."""
    params = ", ".join(f"int c{i}" for i in range(rank))
    coords = ", ".join(f'"r"(c{i})' for i in range(rank))
    return params, coords, f"%{first + rank}"


def _tma_load_hint(rank: int) -> str:
    params, coords, policy = _tma_hint_parts(rank, 3)
    return _tma_hinted(f"tlx_tma_load_hint_{rank}d", "int EVICT",
                       f"void* dst, const void* tensormap, unsigned long long* bar, {params}",
                       f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes",
                       f"[%0], [%1, {_coords(rank, 3)}], [%2], {policy}",
                       f'"r"(tlx_smem_addr(dst)), "l"(tensormap), "r"(tlx_smem_addr(bar)), {coords}')


def _tma_load_multicast_hint(rank: int) -> str:
    params, coords, policy = _tma_hint_parts(rank, 4)
    return _tma_hinted(f"tlx_tma_load_multicast_hint_{rank}d", "int EVICT",
                       f"void* dst, const void* tensormap, unsigned long long* bar, unsigned short cta_mask, {params}",
                       f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
                       ".multicast::cluster",
                       f"[%0], [%1, {_coords(rank, 4)}], [%2], %3, {policy}",
                       f'"r"(tlx_smem_addr(dst)), "l"(tensormap), "r"(tlx_smem_addr(bar)), "h"(cta_mask), {coords}')


def _tma_store_hint(rank: int) -> str:
    params, coords, policy = _tma_hint_parts(rank, 2)
    return _tma_hinted(f"tlx_tma_store_hint_{rank}d", "int EVICT", f"const void* tensormap, const void* src, {params}",
                       f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group",
                       f"[%0, {_coords(rank, 2)}], [%1], {policy}",
                       f'"l"(tensormap), "r"(tlx_smem_addr(src)), {coords}')


def _tma_reduce_hint(rank: int) -> str:
    """One helper for every reduction: TMA_REDUCE_OPS[KIND]."""
    params, coords, policy = _tma_hint_parts(rank, 2)
    branches = []
    for k, kind in enumerate(TMA_REDUCE_OPS):
        keyword = "if constexpr" if not branches else "else if constexpr"
        branches.append(f'  {keyword} (KIND == {k})\n'
                        f'    asm volatile("cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{kind}.tile.bulk_group'
                        f'.L2::cache_hint [%0, {_coords(rank, 2)}], [%1], {policy};"\n'
                        f'                 :: "l"(tensormap), "r"(tlx_smem_addr(src)), {coords}, '
                        f'"l"(tlx_l2_policy<EVICT>()) : "memory");')
    body = "\n".join(branches)
    return f"""
template <int KIND, int EVICT>
{_INLINE} void tlx_tma_reduce_hint_{rank}d(const void* tensormap, const void* src, {params}) {{
{body}
}}"""


def _tma_prefetch_hint(rank: int) -> str:
    params, coords, policy = _tma_hint_parts(rank, 1)
    return _tma_hinted(f"tlx_tma_prefetch_hint_{rank}d", "int EVICT", f"const void* tensormap, {params}",
                       f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile",
                       f"[%0, {_coords(rank, 1)}], {policy}", f'"l"(tensormap), {coords}')


for _rank in range(1, 6):
    define(f"tlx_tma_prefetch_hint_{_rank}d", _tma_prefetch_hint(_rank), "tlx_l2_policy")
    define(f"tlx_tma_load_hint_{_rank}d", _tma_load_hint(_rank), "tlx_smem_addr", "tlx_l2_policy")
    define(f"tlx_tma_load_multicast_hint_{_rank}d", _tma_load_multicast_hint(_rank), "tlx_smem_addr",
           "tlx_l2_policy")
    define(f"tlx_tma_store_hint_{_rank}d", _tma_store_hint(_rank), "tlx_smem_addr", "tlx_l2_policy")
    define(f"tlx_tma_reduce_hint_{_rank}d", _tma_reduce_hint(_rank), "tlx_smem_addr", "tlx_l2_policy")


@helper("tlx_bulk_commit_group")
def bulk_commit_group():
    return f"""
{_INLINE} void tlx_bulk_commit_group() {{
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}}"""


@helper("tlx_bulk_wait_group_read")
def bulk_wait_group_read():
    return """
template <int N>
static __device__ __forceinline__ void tlx_bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}"""


# -- bulk copies (cp.async.bulk, non-tensor) and prefetch hints --------------------------------
# A contiguous run of ``bytes`` (a multiple of 16, 16-byte aligned addresses): global → shared
# completing on an mbarrier as transaction bytes, shared → global in the bulk group.
@helper("tlx_bulk_load", "tlx_smem_addr")
def bulk_load():
    return f"""
{_INLINE} void tlx_bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {{
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(tlx_smem_addr(dst)), "l"(src), "r"(bytes), "r"(tlx_smem_addr(bar)) : "memory");
}}"""


@helper("tlx_bulk_load_hint", "tlx_smem_addr", "tlx_l2_policy")
def bulk_load_hint():
    return _tma_hinted("tlx_bulk_load_hint", "int EVICT",
                       "void* dst, const void* src, unsigned bytes, unsigned long long* bar",
                       "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                       "[%0], [%1], %2, [%3], %4",
                       '"r"(tlx_smem_addr(dst)), "l"(src), "r"(bytes), "r"(tlx_smem_addr(bar))')


@helper("tlx_bulk_store", "tlx_smem_addr")
def bulk_store():
    return f"""
{_INLINE} void tlx_bulk_store(void* dst, const void* src, unsigned bytes) {{
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(dst), "r"(tlx_smem_addr(src)), "r"(bytes) : "memory");
}}"""


def _prefetch_global(level: str) -> str:
    return f"""
{_INLINE} void tlx_prefetch_global_{level}(const void* p) {{
  asm volatile("prefetch.global.{level} [%0];" :: "l"(p));
}}"""


for _level in ("L1", "L2"):
    define(f"tlx_prefetch_global_{_level}", _prefetch_global(_level))


@helper("tlx_prefetch_tensormap")
def prefetch_tensormap():
    # A generic address (of the __grid_constant__ parameter or of a descriptor in global memory):
    # prefetch.tensormap without a state space takes either.
    return f"""
{_INLINE} void tlx_prefetch_tensormap(const void* tensormap) {{
  asm volatile("prefetch.tensormap [%0];" :: "l"(tensormap) : "memory");
}}"""


# -- register reallocation ---------------------------------------------------------------
@helper("tlx_setmaxnreg_inc")
def setmaxnreg_inc():
    return """
template <int N>
static __device__ __forceinline__ void tlx_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}"""


@helper("tlx_setmaxnreg_dec")
def setmaxnreg_dec():
    return """
template <int N>
static __device__ __forceinline__ void tlx_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}"""


# -- wgmma (sm_90a) ---------------------------------------------------------------------------
# A warpgroup (4 aligned warps) issues wgmma.mma_async together; the operands come from shared
# memory through 64-bit matrix descriptors (codegen_nvptx/rules_mma_async.py builds them).  The
# instructions are asynchronous: fence before the first one that reads registers written by other
# instructions, commit them as a group, wait for the group before reading the accumulator.
@helper("tlx_wgmma_fence")
def wgmma_fence():
    return f"""
{_INLINE} void tlx_wgmma_fence() {{
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}}"""


@helper("tlx_wgmma_commit_group")
def wgmma_commit_group():
    return f"""
{_INLINE} void tlx_wgmma_commit_group() {{
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}}"""


@helper("tlx_wgmma_wait_group")
def wgmma_wait_group():
    # The empty asm statements after the wait "rewrite" every accumulator register, so the device
    # compiler cannot move a read of the accumulator above the wait.
    return """
template <int N, int R>
static __device__ __forceinline__ void tlx_wgmma_wait_group(float* d) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}"""


@helper("tlx_wgmma_desc", "tlx_smem_addr")
def wgmma_desc():
    # Matrix descriptor: bits 0-13 hold the start address >> 4; ``fields`` (from
    # rules_mma_async.descriptor_fields) holds LBO, SBO and the swizzle mode.  The operand
    # is ``base`` plus ``offset`` bytes (both 16-byte aligned, as descriptors require):
    # split so that the base's shared address is computed once per MMA and each
    # instruction's descriptor is one 32-bit add of a constant.  The low word is built as
    # ``(fields | start) + offset`` (no carry leaves bits 0-13: shared memory ends below
    # 256 KB) and joined to the constant high word by one mov.b64, so ptxas does not redo the
    # OR with the fields for every k step (sm_90a SASS: 6 -> 4 uniform instructions per SS
    # wgmma; the attention backward's consumer loop 768 -> 696 instructions per tile).
    return f"""
{_INLINE} unsigned long long tlx_wgmma_desc(const void* base, unsigned offset, unsigned long long fields) {{
  unsigned lo = ((unsigned)fields | ((tlx_smem_addr(base) & 0x3FFFFu) >> 4)) + (offset >> 4);
  unsigned long long d;
  asm("mov.b64 %0, {{%1, %2}};" : "=l"(d) : "r"(lo), "r"((unsigned)(fields >> 32)));
  return d;
}}"""


WGMMA_N = tuple(range(8, 257, 8))
# tlxc element name -> (PTX type, K of one instruction, transposable): 16-bit inputs may be
# MN-major (imm-trans operands); fp8 and tf32 are K-major only and their form has no imm-trans.
WGMMA_INPUTS = {"bf16": ("bf16", 16, True), "f16": ("f16", 16, True), "f8e4m3": ("e4m3", 32, False),
                "f8e5m2": ("e5m2", 32, False), "f32": ("tf32", 8, False)}


# fp8 A and B may differ (wgmma's .atype / .btype): e4m3 x e5m2 and e5m2 x e4m3 have helpers too
WGMMA_MIXED = (("f8e4m3", "f8e5m2"), ("f8e5m2", "f8e4m3"))


def wgmma_name(n: int, dtype: str, b_dtype: str | None = None) -> str:
    """The helper of ``m64n<n>k<K>`` on tlxc element type ``dtype`` (A and B), or A ``dtype`` and
    B ``b_dtype`` when they differ (rules_mma_async.py spells it alike)."""
    _, k, _ = WGMMA_INPUTS[dtype]
    mixed = f"_{b_dtype}" if b_dtype not in (None, dtype) else ""
    return f"tlx_wgmma_m64n{n}k{k}_f32_{dtype}{mixed}"


def _wgmma_ss(n: int, dtype: str, b_dtype: str | None = None) -> str:
    """``wgmma.mma_async`` with A and B in shared memory (descriptors ``da``, ``db``),
    an f32 accumulator of n/2 registers, ``scale_d`` = 0 to ignore the accumulator's
    input (use_acc=False); TA / TB: 1 for an M-/N-major (transposed) operand, which only
    16-bit inputs allow (the helper of the others takes no TA / TB); ``b_dtype``: B's type
    when it differs from A's (fp8 only)."""
    ptx_type, k, transposable = WGMMA_INPUTS[dtype]
    b_ptx_type = WGMMA_INPUTS[b_dtype or dtype][0]
    regs = n // 2
    d_list = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}.{b_ptx_type}"
    trans = f", %{regs + 3}, %{regs + 4}" if transposable else ""
    asm = ("{\\n .reg .pred p;\\n setp.ne.b32 p, %" + str(regs + 2) + ", 0;\\n "
           + mnemonic + " {" + d_list + "}, %" + str(regs) + ", %" + str(regs + 1)
           + ", p, 1, 1" + trans + ";\\n}")
    template = "template <int TA, int TB>\n" if transposable else ""
    trans_inputs = ', "n"(TA), "n"(TB)' if transposable else ""
    return f"""
{template}{_INLINE} void {wgmma_name(n, dtype, b_dtype)}(float* d, unsigned long long da, unsigned long long db, int scale_d) {{
  asm volatile("{asm}"
               : {outs}
               : "l"(da), "l"(db), "r"(scale_d){trans_inputs} : "memory");
}}"""


def _wgmma_rs(n: int, dtype: str, b_dtype: str | None = None) -> str:
    """``wgmma.mma_async`` with A in registers and B in shared memory: four 32-bit registers
    of two 16-bit elements each (the accumulator's fragment pattern; TB: 1 for an N-major B),
    or of four 8-bit elements each (fp8, k32: four consecutive K elements per register, built
    by ``tlx_wgmma_a8_fragment``; K-major B only, no TB); ``b_dtype``: B's type when it
    differs from A's (fp8 only)."""
    ptx_type, k, transposable = WGMMA_INPUTS[dtype]
    b_ptx_type = WGMMA_INPUTS[b_dtype or dtype][0]
    regs = n // 2
    d_list = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    a_list = ", ".join(f"%{regs + i}" for i in range(4))
    mnemonic = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}.{b_ptx_type}"
    trans = f", %{regs + 6}" if transposable else ""
    asm = ("{\\n .reg .pred p;\\n setp.ne.b32 p, %" + str(regs + 5) + ", 0;\\n "
           + mnemonic + " {" + d_list + "}, {" + a_list + "}, %" + str(regs + 4)
           + ", p, 1, 1" + trans + ";\\n}")
    template = "template <int TB>\n" if transposable else ""
    trans_input = ', "n"(TB)' if transposable else ""
    return f"""
{template}{_INLINE} void {wgmma_name(n, dtype, b_dtype)}_rs(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
    unsigned long long db, int scale_d) {{
  asm volatile("{asm}"
               : {outs}
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(scale_d){trans_input} : "memory");
}}"""


for _dtype in WGMMA_INPUTS:
    for _n in WGMMA_N:
        define(wgmma_name(_n, _dtype), _wgmma_ss(_n, _dtype))
        if _dtype != "f32":             # (tf32 A from registers: not used)
            define(wgmma_name(_n, _dtype) + "_rs", _wgmma_rs(_n, _dtype))
for _a, _b in WGMMA_MIXED:
    for _n in WGMMA_N:
        define(wgmma_name(_n, _a, _b), _wgmma_ss(_n, _a, _b))
        define(wgmma_name(_n, _a, _b) + "_rs", _wgmma_rs(_n, _a, _b))


@helper("tlx_wgmma_a8_fragment")
def wgmma_a8_fragment():
    # wgmma's k32 A fragment of 8-bit elements (PTX ISA, register fragments of m64nNk32: lane
    # 4g + q holds row g (a0, a2) and g + 8 (a1, a3), columns 4q .. 4q + 3 (a0, a1) and
    # 16 + 4q .. 16 + 4q + 3 (a2, a3) of each 32-column step, lowest byte first) from values
    # in the f32 accumulator's pattern (lane 4g + q holds columns 2q, 2q + 1 of every 8).
    # w[h][m] (h: the step's 16-column half, m: its 8-column part) packs this lane's
    # (row g, 8m + 2q), (g, 8m + 2q + 1), (g + 8, 8m + 2q), (g + 8, 8m + 2q + 1).  Lane q needs
    # part m = q / 2 from lanes 2(q % 2) and 2(q % 2) + 1 of its quad: in round r it reads lane
    # 2(q % 2) + (r ^ m), which sends part r ^ (its lane % 2) -- one reader per sender and
    # round, so 4 shuffles for the 4 registers; a byte permute then orders each register.
    return f"""
{_INLINE} void tlx_wgmma_a8_fragment(unsigned w00, unsigned w01, unsigned w10, unsigned w11, unsigned* a) {{
  const int lane = threadIdx.x & 31, odd = lane & 1, m = (lane >> 1) & 1;
  const int src0 = (lane & ~3) | (odd << 1) | m, src1 = src0 ^ 1;
  unsigned v00 = __shfl_sync(0xffffffffu, odd ? w01 : w00, src0);
  unsigned v01 = __shfl_sync(0xffffffffu, odd ? w00 : w01, src1);
  unsigned v10 = __shfl_sync(0xffffffffu, odd ? w11 : w10, src0);
  unsigned v11 = __shfl_sync(0xffffffffu, odd ? w10 : w11, src1);
  const unsigned lo = m ? 0x1054u : 0x5410u, hi = m ? 0x3276u : 0x7632u;
  a[0] = __byte_perm(v00, v01, lo);
  a[1] = __byte_perm(v00, v01, hi);
  a[2] = __byte_perm(v10, v11, lo);
  a[3] = __byte_perm(v10, v11, hi);
}}"""



# -- tcgen05 (sm_100a) -------------------------------------------------------------------------
# Blackwell's 5th-generation tensor cores (PTX ISA 9.7.16).  Tensor memory (TMEM) is allocated
# and freed by one whole warp (.sync.aligned); an MMA and its commit have single-thread
# semantics; tcgen05.ld / tcgen05.st are warp-collective and asynchronous until
# tcgen05.wait::ld / wait::st.  A TMEM address is (lane << 16) | column.  PTX requires every
# tcgen05 instruction of a kernel to name the same .cta_group: the ``_cg2`` helpers are the
# cta_group::2 forms, used by kernels whose MMAs are 2-CTA (``two_ctas=True``); there one warp
# of each CTA of the pair runs the alloc/dealloc.
def _tcgen05_alloc(group: int) -> str:
    # writes the allocation's TMEM address to the shared-memory word ``slot``
    suffix = "" if group == 1 else "_cg2"
    return f"""
{_INLINE} void tlx_tcgen05_alloc{suffix}(unsigned* slot, unsigned columns) {{
  asm volatile("tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [%0], %1;"
               :: "r"(tlx_smem_addr(slot)), "r"(columns) : "memory");
}}"""


def _tcgen05_relinquish_alloc_permit(group: int) -> str:
    suffix = "" if group == 1 else "_cg2"
    return f"""
{_INLINE} void tlx_tcgen05_relinquish_alloc_permit{suffix}() {{
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned;" ::: "memory");
}}"""


def _tcgen05_dealloc(group: int) -> str:
    suffix = "" if group == 1 else "_cg2"
    return f"""
{_INLINE} void tlx_tcgen05_dealloc{suffix}(unsigned taddr, unsigned columns) {{
  asm volatile("tcgen05.dealloc.cta_group::{group}.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(columns) : "memory");
}}"""


for _group, _suffix in ((1, ""), (2, "_cg2")):
    define(f"tlx_tcgen05_alloc{_suffix}", _tcgen05_alloc(_group), "tlx_smem_addr")
    define(f"tlx_tcgen05_relinquish_alloc_permit{_suffix}", _tcgen05_relinquish_alloc_permit(_group))
    define(f"tlx_tcgen05_dealloc{_suffix}", _tcgen05_dealloc(_group))


@helper("tlx_tcgen05_fence_before_thread_sync")
def tcgen05_fence_before_thread_sync():
    return f"""
{_INLINE} void tlx_tcgen05_fence_before_thread_sync() {{
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}}"""


@helper("tlx_tcgen05_fence_after_thread_sync")
def tcgen05_fence_after_thread_sync():
    return f"""
{_INLINE} void tlx_tcgen05_fence_after_thread_sync() {{
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}}"""


# tlxc element name -> (.kind of tcgen05.mma, K of one instruction)
TCGEN05_INPUTS = {"bf16": ("f16", 16), "f16": ("f16", 16), "f32": ("tf32", 8), "f8e4m3": ("f8f6f4", 32),
                  "f8e5m2": ("f8f6f4", 32)}
TCGEN05_KINDS = ("f16", "tf32", "f8f6f4")


def _tcgen05_mma(kind: str, group: int = 1) -> str:
    """One ``tcgen05.mma`` with A and B in shared memory (descriptors ``da``, ``db``) into the
    TMEM accumulator at ``d_tmem``; ``idesc`` holds the types, shape and major-ness;
    ``enable_input_d`` = 0 ignores the accumulator's old value.  ``group`` 2: the CTA pair's
    MMA (issued by the even CTA; the descriptors and ``d_tmem`` name the same places in both
    CTAs' shared and tensor memory)."""
    name = f"tlx_tcgen05_mma_{kind}" if group == 1 else f"tlx_tcgen05_mma_cg2_{kind}"
    return f"""
{_INLINE} void {name}(unsigned d_tmem, unsigned long long da, unsigned long long db,
    unsigned idesc, int enable_input_d) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %4, 0;\\n tcgen05.mma.cta_group::{group}.kind::{kind} [%0], %1, %2, %3, p;\\n}}"
               :: "r"(d_tmem), "l"(da), "l"(db), "r"(idesc), "r"(enable_input_d) : "memory");
}}"""


def _tcgen05_mma_tmem_a(kind: str) -> str:
    """One ``tcgen05.mma`` with A in tensor memory (``a_tmem``: M lanes, K packed along the
    columns, K-major) and B in shared memory (descriptor ``db``) into the accumulator at
    ``d_tmem``; the rest as ``_tcgen05_mma``."""
    return f"""
{_INLINE} void tlx_tcgen05_mma_tmem_a_{kind}(unsigned d_tmem, unsigned a_tmem, unsigned long long db,
    unsigned idesc, int enable_input_d) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %4, 0;\\n tcgen05.mma.cta_group::1.kind::{kind} [%0], [%1], %2, %3, p;\\n}}"
               :: "r"(d_tmem), "r"(a_tmem), "l"(db), "r"(idesc), "r"(enable_input_d) : "memory");
}}"""


@helper("tlx_tcgen05_mma_mxf8f6f4_block_scale")
def tcgen05_mma_mxf8f6f4_block_scale():
    # Block-scaled fp8 MMA (mxfp8): A and B in shared memory (descriptors), their ue8m0 scales
    # in tensor memory at ``sfa`` / ``sfb`` (one byte per row per 32 K elements; which byte of
    # each 32-bit column is the instruction descriptor's scale-factor IDs, bits 29-30 and 4-5).
    return f"""
{_INLINE} void tlx_tcgen05_mma_mxf8f6f4_block_scale(unsigned d_tmem, unsigned long long da, unsigned long long db,
    unsigned idesc, unsigned sfa, unsigned sfb, int enable_input_d) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %6, 0;\\n tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%4], [%5], p;\\n}}"
               :: "r"(d_tmem), "l"(da), "l"(db), "r"(idesc), "r"(sfa), "r"(sfb), "r"(enable_input_d) : "memory");
}}"""


@helper("tlx_tcgen05_cp_32x128b_warpx4")
def tcgen05_cp_32x128b_warpx4():
    # Shared -> tensor memory: 32 rows of 16 bytes (the descriptor ``src``) into lanes 0-31,
    # 4 columns from ``taddr``, repeated in the lanes of every warp's 32 (``.warpx4``).  Runs
    # asynchronously, in order with the issuing thread's tcgen05.mma (a later MMA sees it).
    return f"""
{_INLINE} void tlx_tcgen05_cp_32x128b_warpx4(unsigned taddr, unsigned long long src) {{
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" :: "r"(taddr), "l"(src) : "memory");
}}"""


for _kind in TCGEN05_KINDS:
    define(f"tlx_tcgen05_mma_{_kind}", _tcgen05_mma(_kind))
    define(f"tlx_tcgen05_mma_cg2_{_kind}", _tcgen05_mma(_kind, 2))
    define(f"tlx_tcgen05_mma_tmem_a_{_kind}", _tcgen05_mma_tmem_a(_kind))


@helper("tlx_tcgen05_commit", "tlx_smem_addr")
def tcgen05_commit():
    # One arrival on ``bar`` once every earlier tcgen05 op of this thread is done (the
    # shared::cta address is valid in the shared::cluster window).
    return f"""
{_INLINE} void tlx_tcgen05_commit(unsigned long long* bar) {{
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :: "r"(tlx_smem_addr(bar)) : "memory");
}}"""


@helper("tlx_tcgen05_commit_cg2", "tlx_smem_addr")
def tcgen05_commit_cg2():
    # The CTA pair's commit: one arrival on the barrier at ``bar``'s place in each CTA of
    # ``cta_mask`` (the pair's two bits) once every earlier tcgen05 op of this thread is done.
    return f"""
{_INLINE} void tlx_tcgen05_commit_cg2(unsigned long long* bar, unsigned short cta_mask) {{
  asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
               :: "r"(tlx_smem_addr(bar)), "h"(cta_mask) : "memory");
}}"""


TCGEN05_LDST_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)       # .x1 .. .x128 of the 32x32b shape


def _tcgen05_ld(num: int) -> str:
    """``num`` consecutive columns of lane (32 * (warp % 4) + laneid) into ``r[0..num)``."""
    regs = ", ".join(f"%{i}" for i in range(num))
    outs = ", ".join(f'"=r"(r[{i}])' for i in range(num))
    return f"""
{_INLINE} void tlx_tcgen05_ld_32x32b_x{num}(unsigned taddr, unsigned* r) {{
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x{num}.b32 {{{regs}}}, [%{num}];"
               : {outs} : "r"(taddr) : "memory");
}}"""


def _tcgen05_st(num: int) -> str:
    regs = ", ".join(f"%{i + 1}" for i in range(num))
    ins = ", ".join(f'"r"(r[{i}])' for i in range(num))
    return f"""
{_INLINE} void tlx_tcgen05_st_32x32b_x{num}(unsigned taddr, const unsigned* r) {{
  asm volatile("tcgen05.st.sync.aligned.32x32b.x{num}.b32 [%0], {{{regs}}};"
               :: "r"(taddr), {ins} : "memory");
}}"""


def _tcgen05_ld_16x32bx2(num: int) -> str:
    """The M = 64 access: lanes 0-15 of the warp read ``num`` consecutive columns of lane
    (address lane + laneid) at ``taddr``, lanes 16-31 the same lanes ``HALF`` columns further
    (the immediate ``immHalfSplitoff``), into ``r[0..num)``."""
    regs = ", ".join(f"%{i}" for i in range(num))
    outs = ", ".join(f'"=r"(r[{i}])' for i in range(num))
    return f"""
template <int HALF>
static __device__ __forceinline__ void tlx_tcgen05_ld_16x32bx2_x{num}(unsigned taddr, unsigned* r) {{
  asm volatile("tcgen05.ld.sync.aligned.16x32bx2.x{num}.b32 {{{regs}}}, [%{num}], %{num + 1};"
               : {outs} : "r"(taddr), "n"(HALF) : "memory");
}}"""


def _tcgen05_st_16x32bx2(num: int) -> str:
    regs = ", ".join(f"%{i + 2}" for i in range(num))
    ins = ", ".join(f'"r"(r[{i}])' for i in range(num))
    return f"""
template <int HALF>
static __device__ __forceinline__ void tlx_tcgen05_st_16x32bx2_x{num}(unsigned taddr, const unsigned* r) {{
  asm volatile("tcgen05.st.sync.aligned.16x32bx2.x{num}.b32 [%0], %1, {{{regs}}};"
               :: "r"(taddr), "n"(HALF), {ins} : "memory");
}}"""


for _num in TCGEN05_LDST_NUMS:
    define(f"tlx_tcgen05_ld_32x32b_x{_num}", _tcgen05_ld(_num))
    define(f"tlx_tcgen05_st_32x32b_x{_num}", _tcgen05_st(_num))
    define(f"tlx_tcgen05_ld_16x32bx2_x{_num}", _tcgen05_ld_16x32bx2(_num))
    define(f"tlx_tcgen05_st_16x32bx2_x{_num}", _tcgen05_st_16x32bx2(_num))


def opaque_int(name: str) -> str:
    """An empty asm statement that "rewrites" the int variable ``name``: the device compiler can
    no longer see where its value comes from (nor rematerialize it), so the arithmetic on it
    stays after this point (an epilogue's re-bound thread coordinates, rules_mma_async.py)."""
    return f'asm volatile("" : "+r"({name}));'


@helper("tlx_opaque_pointer")
def opaque_pointer():
    # The pointer through an empty asm: the device compiler no longer sees how it was computed,
    # so it adds an offset to it as one 64-bit value instead of re-deriving it from its parts
    # (TLXC_RING_BASE, passes/pipeline.py).  Not volatile: it may be hoisted or removed.
    return """
template <typename T>
static __device__ __forceinline__ T* tlx_opaque_pointer(T* p) {
  unsigned long long v = reinterpret_cast<unsigned long long>(p);
  asm("" : "+l"(v));
  return reinterpret_cast<T*>(v);
}"""


@helper("tlx_pin_registers")
def pin_registers():
    # Empty asm statements that "rewrite" R registers: every instruction that writes them
    # stays before, and every one that reads them after, the statement (e.g. wgmma.fence
    # after the writes of a register-A fragment).
    return """
template <int R>
static __device__ __forceinline__ void tlx_pin_registers(unsigned* r) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}"""


@helper("tlx_fresh_registers")
def fresh_registers():
    # Each register rewritten in place by an identity byte permute (prmt 0x3210): a new value on
    # every pass of the loop it is in, which ptxas neither folds nor hoists (13.0 and 13.5).
    # A loop-invariant register-A fragment goes through it (rules_mma_async._pinned): ptxas 13.0
    # otherwise kept the invariant fragment in fixed registers across the loop and gave those
    # same registers to the loop's other register-A fragment, so every iteration after the first
    # multiplied that one (attention_decode _variant=4: Q K^T read the previous block's P).
    return """
template <int R>
static __device__ __forceinline__ void tlx_fresh_registers(unsigned* r) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("prmt.b32 %0, %0, 0, 0x3210;" : "+r"(r[i]) :: "memory");
}"""


@helper("tlx_tcgen05_wait_ld")
def tcgen05_wait_ld():
    # The loaded registers hold their values only after the wait; the empty asm statements
    # "rewrite" them after it, so the device compiler cannot move a read above the wait.
    return """
template <int R>
static __device__ __forceinline__ void tlx_tcgen05_wait_ld(unsigned* r) {
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}"""


@helper("tlx_tcgen05_wait_st")
def tcgen05_wait_st():
    return f"""
{_INLINE} void tlx_tcgen05_wait_st() {{
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
}}"""


def definitions(names) -> str:
    """The definitions of ``names`` and their dependencies, dependencies first,
    in the order of ``HELPERS`` (deterministic)."""
    wanted: set[str] = set()

    def add(name):
        if name in wanted:
            return
        wanted.add(name)
        for dep in DEPENDS[name]:
            add(dep)
    for name in names:
        add(name)
    return "\n\n".join(HELPERS[n] for n in HELPERS if n in wanted)


# -- cluster launch control (sm_100a) ----------------------------------------------------------------
# try_cancel asks the hardware for a cluster of the grid that has not started yet; its 16-byte
# answer lands in ``response`` (shared::cta, 16-byte aligned) and completes 16 bytes on ``bar``.
# ``.multicast::cluster::all`` writes the answer (and completes the bytes) in every CTA of the
# cluster at the same offsets.  The query decodes an answer: -1 when nothing was cancelled, else
# the first CTA id (x) of the cancelled cluster.
@helper("tlx_clc_try_cancel", "tlx_smem_addr")
def clc_try_cancel():
    return f"""
{_INLINE} void tlx_clc_try_cancel(const void* response, const void* bar) {{
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];"
               :: "r"(tlx_smem_addr(response)), "r"(tlx_smem_addr(bar)) : "memory");
}}"""


@helper("tlx_clc_try_cancel_multicast", "tlx_smem_addr")
def clc_try_cancel_multicast():
    return f"""
{_INLINE} void tlx_clc_try_cancel_multicast(const void* response, const void* bar) {{
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
               ".multicast::cluster::all.b128 [%0], [%1];" :: "r"(tlx_smem_addr(response)), "r"(tlx_smem_addr(bar)) : "memory");
}}"""


@helper("tlx_clc_query", "tlx_smem_addr")
def clc_query():
    return f"""
{_INLINE} int tlx_clc_query(const void* response) {{
  int x;
  asm volatile("{{\\n .reg .b128 r;\\n .reg .pred p;\\n .reg .b64 lo, hi;\\n"
               " ld.shared.v2.b64 {{lo, hi}}, [%1];\\n mov.b128 r, {{lo, hi}};\\n"
               " clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\\n"
               " @p clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %0, r;\\n"
               " @!p mov.b32 %0, -1;\\n}}" : "=r"(x) : "r"(tlx_smem_addr(response)) : "memory");
  return x;
}}"""


# -- tensor maps encoded in the kernel (in-kernel descriptors: codegen_nvptx/rules_tensormap.py) --------
# ``tensormap.replace`` edits one field of a 128-byte tensor map in global memory (a weak write
# of the generic proxy, sm_90a / sm_100a); ordinals count dimensions innermost first.  The
# writer then releases the map to the tensormap proxy and each user acquires it before a TMA
# copy reads it (PTX ISA: tensormap.replace, fence.proxy.tensormap::generic).
def _tensormap_replace(field: str, width: int, ordinal: bool) -> str:
    ctype = "unsigned long long" if width == 64 else "unsigned"
    constraint = "l" if width == 64 else "r"
    template = "template <int ORD>\nstatic __device__ __forceinline__" if ordinal else _INLINE
    ordinal_operand = "%1, %2" if ordinal else "%1"
    operands = f'"n"(ORD), "{constraint}"(value)' if ordinal else f'"{constraint}"(value)'
    return f"""
{template} void tlx_tensormap_replace_{field}(void* tensormap, {ctype} value) {{
  asm volatile("tensormap.replace.tile.{field}.global.b1024.b{width} [%0], {ordinal_operand};"
               :: "l"(__cvta_generic_to_global(tensormap)), {operands} : "memory");
}}"""


def _tensormap_replace_constant(field: str) -> str:
    # the element type, layout, swizzle and fill take an immediate (PTX: .b32 new_val is a constant)
    return f"""
template <int VALUE>
static __device__ __forceinline__ void tlx_tensormap_replace_{field}(void* tensormap) {{
  asm volatile("tensormap.replace.tile.{field}.global.b1024.b32 [%0], %1;"
               :: "l"(__cvta_generic_to_global(tensormap)), "n"(VALUE) : "memory");
}}"""


for _field, _width, _ordinal in (("global_address", 64, False), ("rank", 32, False), ("box_dim", 32, True),
                                 ("global_dim", 32, True), ("global_stride", 64, True),
                                 ("element_stride", 32, True)):
    define(f"tlx_tensormap_replace_{_field}", _tensormap_replace(_field, _width, _ordinal))
for _field in ("elemtype", "interleave_layout", "swizzle_mode", "fill_mode"):
    define(f"tlx_tensormap_replace_{_field}", _tensormap_replace_constant(_field))


@helper("tlx_fence_tensormap_release")
def fence_tensormap_release():
    # the writer's edits of tensor maps (generic proxy) before the tensormap proxy reads them
    return f"""
{_INLINE} void tlx_fence_tensormap_release() {{
  asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
}}"""


@helper("tlx_fence_tensormap_acquire")
def fence_tensormap_acquire():
    # before this thread's first TMA copy through the map at ``tensormap`` (a generic address).
    # The empty bulk group committed and waited for after the fence is Triton's workaround for a
    # ptxas that drops the ordering of the acquire (TMAToLLVM.cpp: "a ptxas bug missing a fence
    # after generic.acquire.gpu"): without it a copy may still read the slot's previous map.
    return f"""
{_INLINE} void tlx_fence_tensormap_acquire(const void* tensormap) {{
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\\n\\t"
               "cp.async.bulk.commit_group;\\n\\t"
               "cp.async.bulk.wait_group.read 0;" :: "l"(tensormap) : "memory");
}}"""
