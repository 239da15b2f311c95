"""The CUDA target table for the C-style code generator.

Everything the shared lowering needs that differs from HIP: conversions of
16/8-bit floats (through the PTX helpers in ``ptx.py``), predicated vector
loads/stores, warp shuffles, barriers, atomics and the mma instruction.
"""
from __future__ import annotations

from ..codegen_c import c_types as C
from ..codegen_c.words import (
    element_bits,
    pack_words,
    predicated_vector_load_call,
    unpack_words,
    vector_load_call,
    vector_store_call,
)
from ..errors import CompilationError, InternalCompilerError
from ..ir.types import PointerType, ScalarType
from ..target import has_feature
from . import ptx
from .rules_mma_async import wgmma_wait_line

_TO_F32 = {"f16": "tlx_cvt_f32_f16", "bf16": "tlx_bf16_to_f32", "f8e4m3": "tlx_e4m3_to_f32",
           "f8e5m2": "tlx_e5m2_to_f32"}
_FROM_F32 = {"f16": "tlx_cvt_rn_f16_f32", "bf16": "tlx_cvt_rn_bf16_f32",
             "f8e4m3": "tlx_cvt_rn_satfinite_e4m3_f32", "f8e5m2": "tlx_cvt_rn_satfinite_e5m2_f32"}


class CudaTarget:
    name = "nvptx"
    vendor = "nvidia"     # picks the lowering rules (codegen_c/lower.py: rule_for)
    warp_size = 32        # threads per warp (the shared lowering asks the table, never assumes)

    def __init__(self, arch: str):
        self.arch = arch
        self.sm = int("".join(ch for ch in arch if ch.isdigit()))
        self.helpers: list[str] = []

    def use(self, helper: str) -> None:
        if helper not in self.helpers:
            self.helpers.append(helper)

    def helper_definitions(self) -> str:
        return ptx.definitions(self.helpers)

    def dot_wait_line(self, lw, pendings: int, acc, name: str | None = None) -> str:
        """The wait for the kernel's async dots, leaving ``pendings`` groups in flight
        (wgmma.wait_group; the shared ``scf.for`` rule drains a ``dot_drain`` loop with it)."""
        return wgmma_wait_line(lw, pendings, acc, name)

    # -- scalars -------------------------------------------------------------------------
    def _fp8_check(self, t) -> None:
        if t.is_float8 and not has_feature(self.arch, "fp8"):
            raise CompilationError(f"{t} needs sm_89 or newer, not {self.arch}")

    def to_compute(self, expr: str, t) -> str:
        if isinstance(t, ScalarType) and t.name in _TO_F32:
            self._fp8_check(t)
            self.use(_TO_F32[t.name])
            return f"{_TO_F32[t.name]}({expr})"
        return expr

    def from_compute(self, expr: str, t) -> str:
        if isinstance(t, ScalarType) and t.name in _FROM_F32:
            self._fp8_check(t)
            self.use(_FROM_F32[t.name])
            return f"{_FROM_F32[t.name]}({expr})"
        if isinstance(t, ScalarType) and t.is_boolean:
            return f"(bool)({expr})"
        return f"({C.storage_type(t)})({expr})" if not isinstance(t, PointerType) else expr

    def convert(self, expr: str, src, dst) -> str:
        """A storage-typed expression of ``expr`` (storage of ``src``) converted to ``dst``."""
        if src == dst:
            return expr
        value = self.to_compute(expr, src)
        if dst.is_boolean:
            return f"({value} != 0)"
        if src.is_float and dst.is_integer:
            return C.float_to_int(self, value, src, dst)
        compute = C.compute_type(dst)
        return self.from_compute(f"({compute})({value})", dst)

    def exp2_f32(self, expr: str) -> str:
        """``tl.exp2`` of an f32 (or narrower) value: ``ex2.approx.ftz.f32``, as Triton."""
        return self.expr("tlx_ex2_approx_ftz_f32", expr)

    def exp2_f32_fma(self, expr: str) -> str:
        """``tlx.fast_exp2``'s share on the FMA pipe: ``tlx_exp2_fma_f32`` (a polynomial)."""
        return self.expr("tlx_exp2_fma_f32", expr)

    def div_f32(self, x: str, y: str) -> str:
        """``x / y`` on f32 (or narrower) values: ``div.full.f32``, as Triton."""
        return self.expr("tlx_div_full_f32", x, y)

    def sqrt_f32(self, expr: str) -> str:
        """``tl.sqrt`` of an f32 (or narrower) value: ``sqrt.approx.f32``, as Triton."""
        return self.expr("tlx_sqrt_approx_f32", expr)

    def round_tf32(self, expr: str) -> str:
        return self.expr("tlx_cvt_rna_tf32_f32", expr)

    # -- threads and barriers -------------------------------------------------------------
    def group_sync(self, scope) -> str:
        """A barrier over ``scope``'s threads: the CTA, or one task's warps."""
        if scope.bar_id is None:
            return "__syncthreads();"
        self.use("tlx_bar_sync")
        return f"tlx_bar_sync({scope.bar_id}, {scope.threads});"

    def expr(self, helper: str, *args) -> str:
        """A call of ``helper`` as an expression."""
        self.use(helper)
        return f"{helper}({', '.join(map(str, args))})"

    def call(self, helper: str, *args) -> str:
        """A call of ``helper`` as a statement."""
        return self.expr(helper, *args) + ";"

    def mbarrier_init(self, bar: str, count: int) -> str:
        return self.call("tlx_mbarrier_init", bar, f"{count}u")

    def mbarrier_wait(self, bar: str, phase: str, watchdog: tuple | None = None,
                      suspend_ns: int | None = None) -> str:
        """``watchdog`` = (budget_ns, where, task, barrier name, index expr) in debug builds;
        ``suspend_ns``: the try_wait's suspend-time hint (None: the hardware's own limit)."""
        hint = "0u" if suspend_ns is None else f"{suspend_ns}u"
        if watchdog is None:
            if suspend_ns is None:
                return self.call("tlx_mbarrier_wait", bar, f"(unsigned)({phase})")
            return self.call("tlx_mbarrier_wait_suspend", bar, f"(unsigned)({phase})", hint)
        budget, where, task, name, index = watchdog
        return self.call("tlx_mbarrier_wait_watchdog", bar, f"(unsigned)({phase})", hint, f"{budget}ull",
                         f'"{where}"', f'"{task}"', f'"{name}"', index)

    def mbarrier_arrive(self, bar: str, count: int) -> str:
        return self.call("tlx_mbarrier_arrive", bar, f"{count}u")

    def mbarrier_arrive_remote(self, remote_bar: str, count: int) -> str:
        """Arrive on a peer CTA's barrier, given by its cluster address (``mapa``)."""
        return self.call("tlx_mbarrier_arrive_cluster", remote_bar, f"{count}u")

    def user_inline_asm(self, asm: str, outputs, inputs, volatile: bool) -> str:
        """``tl.inline_asm_elementwise``'s statement (``ptx.user_inline_asm``: the only place)."""
        return ptx.user_inline_asm(asm, outputs, inputs, volatile)

    def mbarrier_expect_tx(self, bar: str, nbytes: int) -> str:
        return self.call("tlx_mbarrier_arrive_expect_tx", bar, f"{nbytes}u")

    def named_sync(self, bar_id: str, threads: str) -> str:
        return self.call("tlx_bar_sync", bar_id, threads)

    def named_arrive(self, bar_id: str, threads: str) -> str:
        return self.call("tlx_bar_arrive", bar_id, threads)

    def opaque_pointer(self, expr: str) -> str:
        """``expr`` (a pointer) through ptx.py's ``tlx_opaque_pointer`` (an empty asm statement)."""
        return self.expr("tlx_opaque_pointer", expr)

    def trap(self) -> str:
        """A C expression that aborts the kernel (``tl.device_assert``)."""
        return "__trap()"

    def fence(self, scope: str) -> str:
        helper = {"async_shared": "tlx_fence_proxy_async_shared_cta", "gpu": "tlx_fence_acq_rel_gpu",
                  "sys": "tlx_fence_acq_rel_sys"}[scope]
        return self.call(helper)

    def cp_async(self, dst: str, src: str, pred: str, nbytes: int, attrs=None) -> str:
        """A cp.async of ``nbytes``; with a cache operator (``attrs``: ".ca"/".cg") through the hinted
        helper.  Unhinted, 16-byte copies go L2-only (.cg), as Triton's do.  An eviction policy must
        not reach here (rules_tlx._cp_async_hints drops it)."""
        assert not (attrs or {}).get("eviction"), "cp.async takes no L2 policy (rules_tlx._cp_async_hints)"
        if not (attrs or {}).get("cache"):
            return self.call(f"tlx_cp_async_{nbytes}", dst, src, pred)
        template = f"<{ptx.CP_ASYNC_CACHE_OPS.index(attrs['cache'][1:])}>"
        self.use(f"tlx_cp_async_hint_{nbytes}")
        return f"tlx_cp_async_hint_{nbytes}{template}({dst}, {src}, {pred});"

    def eviction_index(self, attrs) -> int:
        """The template argument of a hinted helper for an op's eviction policy (0: none)."""
        return ptx.EVICTIONS.index(attrs.get("eviction", ""))

    def tma_reduce_index(self, kind: str) -> int:
        return ptx.TMA_REDUCE_OPS.index(kind)

    def cp_async_commit(self) -> str:
        return self.call("tlx_cp_async_commit_group")

    def cp_async_wait(self, pendings: int) -> str:
        self.use("tlx_cp_async_wait_group")
        return f"tlx_cp_async_wait_group<{pendings}>();"

    def setmaxnreg(self, registers: int, increase: bool) -> str:
        helper = "tlx_setmaxnreg_inc" if increase else "tlx_setmaxnreg_dec"
        self.use(helper)
        return f"{helper}<{registers}>();"

    def shfl_xor(self, expr: str, mask: int, ctype: str) -> str:
        if ctype in ("bool", "signed char", "unsigned char", "short", "unsigned short"):
            return f"({ctype})__shfl_xor_sync(0xffffffffu, (int)({expr}), {mask})"
        return f"__shfl_xor_sync(0xffffffffu, {expr}, {mask})"

    # -- memory -------------------------------------------------------------------------
    def load_vector(self, dst: str, ptr: str, pred: str, fill: str, t, width: int, attrs) -> str:
        """Statement loading elements i..i+width-1 of ``dst`` (inside the register loop)."""
        bits = width * element_bits(t)
        at = lambda expr, j: expr.replace("[i]", f"[i + {j}]") if j else expr
        if has_cache_hints(attrs):
            return self.load_hinted([f"{dst}[i + {j}]" for j in range(width)], ptr, pred,
                                    [at(fill, j) for j in range(width)], t, attrs)
        if bits < 32:
            _check_scalar(width)
            return f"{dst}[i] = ({pred}) ? *{ptr} : {fill};"
        helper = f"tlx_ld_global_b{bits}"
        self.use(helper)
        return predicated_vector_load_call(helper, dst, ptr, pred, fill, t, width)

    def store_vector(self, src: str, ptr: str, pred: str, t, width: int, attrs) -> str:
        bits = width * element_bits(t)
        if has_cache_hints(attrs):
            return self.store_hinted([f"{src}[i + {j}]" for j in range(width)], ptr, pred, t, attrs)
        if bits < 32:
            _check_scalar(width)
            return f"if ({pred}) *{ptr} = {src}[i];"
        words = bits // 32
        helper = f"tlx_st_global_b{bits}"
        self.use(helper)
        packed = pack_words([f"{src}[i + {j}]" for j in range(width)], t, words)
        return f"{helper}({ptr}, {pred}, {', '.join(packed)});"

    def load_hinted(self, dsts: list[str], ptr: str, pred: str, fills: list[str], t, attrs) -> str:
        """Load ``len(dsts)`` consecutive elements (8 to 128 bits, aligned) with the op's cache
        hints (tl.load's cache_modifier / eviction_policy / volatile); ``fills`` where not ``pred``."""
        bits = len(dsts) * element_bits(t)
        words, word_type = _hint_words(bits)
        if attrs.get("volatile"):
            helper = f"tlx_ld_volatile_global_b{bits}"
            call = helper
        else:
            helper = f"tlx_ld_global_hint_b{bits}"
            call = f"{helper}<{ptx.LD_CACHE_OPS.index(_cache_op(attrs))}, {self.eviction_index(attrs)}>"
        self.use(helper)
        names = [f"w{k}" for k in range(words)]
        if bits < 32:
            packed, unpacked = [f"({word_type})({fills[0]})"], [f"({C.storage_type(t)})(w0)"]
        else:
            packed, unpacked = pack_words(fills, t, words), unpack_words(names, t, len(dsts))
        decl = f"{word_type} " + ", ".join(f"{n} = {v}" for n, v in zip(names, packed)) + ";"
        assigns = " ".join(f"{d} = {u};" for d, u in zip(dsts, unpacked))
        return f"{{ {decl} {call}({ptr}, {pred}, {', '.join(names)}); {assigns} }}"

    def store_hinted(self, srcs: list[str], ptr: str, pred: str, t, attrs) -> str:
        """Store ``len(srcs)`` consecutive elements with tl.store's cache_modifier / eviction_policy."""
        bits = len(srcs) * element_bits(t)
        words, word_type = _hint_words(bits)
        helper = f"tlx_st_global_hint_b{bits}"
        self.use(helper)
        cache = ptx.ST_CACHE_OPS.index(_cache_op(attrs))
        packed = [f"({word_type})({srcs[0]})"] if bits < 32 else pack_words(srcs, t, words)
        return f"{helper}<{cache}, {self.eviction_index(attrs)}>({ptr}, {pred}, {', '.join(packed)});"

    def load_shared_vector(self, dst: str, ptr: str, t, width: int) -> str:
        """``dst[i..i+width)`` from shared memory at ``ptr`` (32 to 128 bits, aligned)."""
        helper = f"tlx_ld_shared_b{element_bits(t) * width}"
        self.use(helper)
        return vector_load_call(helper, dst, ptr, t, width)

    def store_shared_vector(self, src: str, ptr: str, t, width: int) -> str:
        helper = f"tlx_st_shared_b{element_bits(t) * width}"
        self.use(helper)
        return vector_store_call(helper, src, ptr, t, width)

    def atomic(self, kind: str, t, sem: str, scope: str) -> str:
        """A C expression template with ``{p}`` and ``{v}`` (and ``{c}``, the compare
        value of ``kind == 'cas'``) performing the atomic with memory semantics ``sem``
        and scope ``scope``; it yields the old value in ``t``'s storage type.  Float
        min/max take Triton's route: a signed integer max (min) on the bits where
        ``v`` is non-negative, an unsigned min (max) where its sign bit is set."""
        template = f"<{ptx.ATOM_SEMS.index(sem)}, {ptx.ATOM_SCOPES.index(scope)}>"
        if kind in ("max", "min") and t.is_float:
            return self._float_min_max(kind, t, template)
        op = {"xchg": "exch"}.get(kind, kind)
        ptx_type = _atom_type(op, t)
        name = ptx.atom_name(op, ptx_type)
        self.use(name)
        to_atom, from_atom = _atom_conversions(t, ptx_type)
        args = [to_atom.format("{c}")] if kind == "cas" else []
        args.append(to_atom.format("{v}"))
        return from_atom.format(f"{name}{template}({{p}}, {', '.join(args)})")

    def _float_min_max(self, kind: str, t, template: str) -> str:
        bits = t.bits
        signed, unsigned = ptx.atom_name(kind, f"s{bits}"), \
            ptx.atom_name("min" if kind == "max" else "max", f"u{bits}")
        self.use(signed)
        self.use(unsigned)
        if bits == 32:
            as_int, as_uint, from_int, from_uint = "__float_as_int", "__float_as_uint", "__int_as_float", \
                "__uint_as_float"
            negative = "(__float_as_int({v}) < 0)"
        else:
            as_int, from_int = "__double_as_longlong", "__longlong_as_double"
            as_uint = "(unsigned long long)__double_as_longlong"
            from_uint = "__longlong_as_double((long long)"
            negative = "(__double_as_longlong({v}) < 0)"
        close = ")" if bits == 64 else ""
        on_negative = f"{from_uint}({unsigned}{template}({{p}}, {as_uint}({{v}}))){close}"
        on_positive = f"{from_int}({signed}{template}({{p}}, {as_int}({{v}})))"
        return f"({negative} ? {on_negative} : {on_positive})"

    # -- tensor cores -----------------------------------------------------------------------
    def mma_m16n8k16(self, t) -> str:
        name = f"tlx_mma_m16n8k16_f32_{t.name}"
        self.use(name)
        return name

    def mma_m16n8k8_tf32(self) -> str:
        self.use("tlx_mma_m16n8k8_f32_tf32")
        return "tlx_mma_m16n8k8_f32_tf32"

    def mma_m16n8k32_s8(self) -> str:
        self.use("tlx_mma_m16n8k32_s32_s8")
        return "tlx_mma_m16n8k32_s32_s8"


def has_cache_hints(attrs) -> bool:
    """Whether an access carries cache hints (frontend/cache_hints.py); without, it is emitted as before."""
    return bool(attrs) and any(attrs.get(key) for key in ("cache", "eviction", "volatile"))


def _cache_op(attrs) -> str:
    """The PTX cache operator of an op's ``cache`` attribute (".cg" -> "cg"; "" when none)."""
    return attrs.get("cache", "").lstrip(".")


def _hint_words(bits: int) -> tuple[int, str]:
    """(words, their C type) of a hinted access of ``bits``: 8/16-bit accesses use one 16-bit register."""
    return (1, "unsigned short") if bits < 32 else (bits // 32, "unsigned")


def _check_scalar(width: int) -> None:
    """Accesses narrower than 32 bits move one element: the loop steps by ``width``."""
    if width != 1:
        raise InternalCompilerError(f"a {width}-element access narrower than 32 bits (a tlxc bug: "
                                    f"vector_width must return 1 for it)")








def _atom_type(op: str, t) -> str:
    """The PTX type of ``atom.<op>`` on ``t`` elements (checked by the IR verifier)."""
    bits = t.bits
    if op in ("and", "or", "xor", "exch", "cas"):
        return f"b{bits}"
    if t.is_float:
        return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[t.name]
    if op == "add":
        return "s32" if t.name == "i32" else f"u{bits}"     # two's complement: add.u64 serves i64
    return f"{'u' if t.is_unsigned else 's'}{bits}"


def _atom_conversions(t, ptx_type: str) -> tuple[str, str]:
    """(storage → helper operand, helper result → storage) format strings."""
    helper_type = ptx.ATOM_TYPES[ptx_type][0]
    if t.name == "f32" and ptx_type == "b32":
        return "__float_as_uint({})", "__uint_as_float({})"
    if t.name == "f64" and ptx_type == "b64":
        return "(unsigned long long)__double_as_longlong({})", "__longlong_as_double((long long){})"
    storage = C.storage_type(t)
    if storage == helper_type:
        return "{}", "{}"
    return f"({helper_type})({{}})", f"({storage})({{}})"
