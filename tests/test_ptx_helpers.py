"""Every inline-PTX helper in ``tlxc/codegen_nvptx/ptx.py`` has a case here.

Each case is a call snippet placed in a tiny kernel, compiled by NVRTC to a
cubin (so ptxas accepts the asm string and its constraints) and to PTX, where
the instruction the helper owns must appear.  ``test_every_helper_has_a_case``
makes a new helper fail until it adds its case to ``CASES``.

The kernels of one architecture are compiled together, once per test process
(``probe_<helper>`` each, in one translation unit: two NVRTC calls instead of
two per case; under pytest-xdist the cases of an arch run on one worker,
``--dist loadgroup`` in pyproject.toml); should that unit fail to compile,
every case compiles its kernel alone, so the failure names its helper.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tlxc.codegen_nvptx import ptx
from tlxc.codegen_nvptx.toolchain import compile_cuda

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ("sm_90a", "sm_100a")


@dataclass(frozen=True)
class Case:
    """``body`` runs in ``probe(unsigned* out, const unsigned* in)``; every
    helper result must reach ``out`` so that nothing is dead code."""

    body: str
    mnemonics: tuple[str, ...]          # each must appear in the kernel's PTX
    archs: tuple[str, ...] = ARCHS      # where the instruction exists
    absent: tuple[str, ...] = ()        # must not appear (e.g. a memcpy left unfolded)
    also: tuple[str, ...] = ()          # other helpers the snippet calls
    bounds: str = ""                    # e.g. "__launch_bounds__(256, 1) " (setmaxnreg wants one)


def _load(bits: int) -> Case:
    words = bits // 32
    names = ", ".join(f"w{k}" for k in range(words))
    decl = "unsigned " + ", ".join(f"w{k} = {k}u" for k in range(words)) + ";"
    stores = " ".join(f"out[{k}] = w{k};" for k in range(words))
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    body = f"{decl} tlx_ld_global_b{bits}(in + 4 * threadIdx.x, in[0] != 0, {names}); {stores}"
    return Case(body, (f"ld.global.{vec}",))


def _shared(bits: int, store: bool) -> Case:
    words = bits // 32
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    names = ", ".join(f"w{k}" for k in range(words))
    if store:
        values = ", ".join(f"in[{k}]" for k in range(words))
        body = (f"__shared__ unsigned buf[128]; tlx_st_shared_b{bits}(buf + 4 * (threadIdx.x & 7), {values}); "
                f"__syncthreads(); out[threadIdx.x] = buf[threadIdx.x & 127];")
        return Case(body, (f"st.shared.{vec}",))
    body = (f"__shared__ unsigned buf[128]; buf[threadIdx.x & 127] = in[threadIdx.x]; __syncthreads(); "
            f"unsigned {names}; tlx_ld_shared_b{bits}(buf + 4 * (threadIdx.x & 7), {names}); "
            + " ".join(f"out[{k}] = w{k};" for k in range(words)))
    return Case(body, (f"ld.shared.{vec}",))


def _store(bits: int) -> Case:
    words = bits // 32
    values = ", ".join(f"in[{k}]" for k in range(words))
    vec = {1: "b32", 2: "v2.b32", 4: "v4.b32"}[words]
    return Case(f"tlx_st_global_b{bits}(out + 4 * threadIdx.x, in[7] != 0, {values});", (f"st.global.{vec}",))


def _cp_async(nbytes: int) -> Case:
    words = nbytes // 4
    body = ("__shared__ __align__(16) unsigned buf[4 * 128];\n"
            f"  tlx_cp_async_{nbytes}(&buf[{words} * threadIdx.x], in + {words} * threadIdx.x, in[0] != 0);\n"
            "  tlx_cp_async_commit_group();\n"
            "  tlx_cp_async_wait_group<0>();\n"
            "  __syncthreads();\n"
            "  out[threadIdx.x] = buf[threadIdx.x ^ 1];")
    cache = "cg" if nbytes == 16 else "ca"
    return Case(body, (f"cp.async.{cache}.shared.global", f", {nbytes}, "),
                also=("tlx_cp_async_commit_group", "tlx_cp_async_wait_group"))


# The mbarrier snippets share one barrier in shared memory.
_BAR = "__shared__ unsigned long long bar;\n  "


def _tma(rank: int, store: bool) -> Case:
    # The tensor map comes from global memory here; in kernels it is a __grid_constant__ parameter.
    coords = ", ".join(f"(int)in[{i}]" for i in range(rank))
    if store:
        body = (f"__shared__ __attribute__((aligned(128))) float buf[256]; buf[threadIdx.x & 255] = 1.0f; "
                f"tlx_tma_store_{rank}d(in + 64, buf, {coords}); tlx_bulk_commit_group(); "
                f"tlx_bulk_wait_group_read<0>(); out[0] = 1u;")
        return Case(body, (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group",),
                    also=("tlx_bulk_commit_group", "tlx_bulk_wait_group_read"))
    body = (f"__shared__ __attribute__((aligned(128))) float buf[256]; {_BAR}"
            f"tlx_tma_load_{rank}d(buf, in + 64, &bar, {coords}); out[0] = __float_as_uint(buf[threadIdx.x]);")
    return Case(body, (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes",))


def _tma_reduce(kind: str, rank: int) -> Case:
    coords = ", ".join(f"(int)in[{i}]" for i in range(rank))
    body = (f"__shared__ __attribute__((aligned(128))) float buf[256]; buf[threadIdx.x & 255] = 1.0f; "
            f"tlx_tma_reduce_{kind}_{rank}d(in + 64, buf, {coords}); tlx_bulk_commit_group(); "
            f"tlx_bulk_wait_group_read<0>(); out[0] = 1u;")
    return Case(body, (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{kind}.tile.bulk_group",),
                also=("tlx_bulk_commit_group", "tlx_bulk_wait_group_read"))


def _tma_prefetch(rank: int) -> Case:
    coords = ", ".join(f"(int)in[{i}]" for i in range(rank))
    return Case(f"tlx_tma_prefetch_{rank}d(in + 64, {coords}); out[0] = 1u;",
                (f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile",))


def _tma_multicast(rank: int) -> Case:
    coords = ", ".join(f"(int)in[{i}]" for i in range(rank))
    body = (f"__shared__ __attribute__((aligned(128))) float buf[256]; {_BAR}"
            f"tlx_tma_load_multicast_{rank}d(buf, in + 64, &bar, (unsigned short)3, {coords}); "
            f"out[0] = __float_as_uint(buf[threadIdx.x]);")
    instruction = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
    return Case(body, (instruction,))


def _mma(dtype: str) -> Case:
    body = ("float d[4] = {0.f, 0.f, 0.f, 0.f}; unsigned short a[8], b[4];\n"
            "  for (int k = 0; k < 8; ++k) a[k] = (unsigned short)in[k];\n"
            "  for (int k = 0; k < 4; ++k) b[k] = (unsigned short)in[8 + k];\n"
            f"  tlx_mma_m16n8k16_f32_{dtype}(d, a, b);\n"
            "  for (int k = 0; k < 4; ++k) out[4 * threadIdx.x + k] = __float_as_uint(d[k]);")
    return Case(body, (f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32",))


_WGMMA_PROBE = ("__shared__ __attribute__((aligned(1024))) unsigned short buf[2 * 64 * 64];\n"
                "  for (int k = threadIdx.x; k < 2 * 64 * 64; k += blockDim.x) buf[k] = (unsigned short)in[k & 255];\n"
                "  __syncthreads();\n"
                "  const unsigned long long fields = (1ull << 62) | (64ull << 32) | (1ull << 16);\n"
                "  const unsigned long long da = tlx_wgmma_desc(buf, 0u, fields), db = tlx_wgmma_desc(buf, 2u * 64 * 64, fields);\n")
_WGMMA_HELPERS = ("tlx_wgmma_desc", "tlx_wgmma_fence", "tlx_wgmma_commit_group", "tlx_wgmma_wait_group")


_SM100 = ("sm_100a",)


def _tcgen05_mma(kind: str, group: int = 1) -> Case:
    name = f"tlx_tcgen05_mma_{kind}" if group == 1 else f"tlx_tcgen05_mma_cg2_{kind}"
    body = ("const unsigned long long da = ((unsigned long long)in[1] << 32) | in[2], "
            "db = ((unsigned long long)in[3] << 32) | in[4];\n"
            f"  if (threadIdx.x == 0) {name}(in[0], da, db, in[5], (int)in[6]);\n  out[0] = 1u;")
    return Case(body, (f"tcgen05.mma.cta_group::{group}.kind::{kind}",), archs=_SM100,
                bounds="" if group == 1 else _PAIR)


def _tcgen05_mma_tmem_a(kind: str) -> Case:
    body = ("const unsigned long long db = ((unsigned long long)in[3] << 32) | in[4];\n"
            f"  if (threadIdx.x == 0) tlx_tcgen05_mma_tmem_a_{kind}(in[0], in[1], db, in[5], (int)in[6]);\n"
            "  out[0] = 1u;")
    return Case(body, (f"tcgen05.mma.cta_group::1.kind::{kind}",), archs=_SM100)


_PAIR = "__cluster_dims__(2, 1, 1) "      # the cta_group::2 forms run on a CTA pair
_TMEM_ALLOC_CG2 = ("__shared__ unsigned slot;\n"
                   "  if (threadIdx.x < 32) { tlx_tcgen05_alloc_cg2(&slot, 32u); "
                   "tlx_tcgen05_relinquish_alloc_permit_cg2(); }\n  __syncthreads(); out[0] = slot;")


def _tcgen05_ld(num: int) -> Case:
    body = (f"unsigned r[{num}]; tlx_tcgen05_ld_32x32b_x{num}(in[0], r); tlx_tcgen05_wait_ld<{num}>(r);\n"
            f"  for (int k = 0; k < {num}; ++k) out[{num} * threadIdx.x + k] = r[k];")
    return Case(body, (f"tcgen05.ld.sync.aligned.32x32b.x{num}.b32", "tcgen05.wait::ld.sync.aligned"),
                archs=_SM100, also=("tlx_tcgen05_wait_ld",))


def _tcgen05_st(num: int) -> Case:
    body = (f"unsigned r[{num}];\n  for (int k = 0; k < {num}; ++k) r[k] = in[k + threadIdx.x];\n"
            f"  tlx_tcgen05_st_32x32b_x{num}(in[0], r); tlx_tcgen05_wait_st(); out[0] = 1u;")
    return Case(body, (f"tcgen05.st.sync.aligned.32x32b.x{num}.b32", "tcgen05.wait::st.sync.aligned"),
                archs=_SM100, also=("tlx_tcgen05_wait_st",))


def _tcgen05_ld_half(num: int) -> Case:
    # the M = 64 shape: lanes 16-31 read ``num`` columns further (the immediate)
    body = (f"unsigned r[{num}]; tlx_tcgen05_ld_16x32bx2_x{num}<{num}>(in[0], r); tlx_tcgen05_wait_ld<{num}>(r);\n"
            f"  for (int k = 0; k < {num}; ++k) out[{num} * threadIdx.x + k] = r[k];")
    return Case(body, (f"tcgen05.ld.sync.aligned.16x32bx2.x{num}.b32", "tcgen05.wait::ld.sync.aligned"),
                archs=_SM100, also=("tlx_tcgen05_wait_ld",))


def _tcgen05_st_half(num: int) -> Case:
    body = (f"unsigned r[{num}];\n  for (int k = 0; k < {num}; ++k) r[k] = in[k + threadIdx.x];\n"
            f"  tlx_tcgen05_st_16x32bx2_x{num}<{num}>(in[0], r); tlx_tcgen05_wait_st(); out[0] = 1u;")
    return Case(body, (f"tcgen05.st.sync.aligned.16x32bx2.x{num}.b32", "tcgen05.wait::st.sync.aligned"),
                archs=_SM100, also=("tlx_tcgen05_wait_st",))


_TMEM_ALLOC = ("__shared__ unsigned slot;\n"
               "  if (threadIdx.x < 32) { tlx_tcgen05_alloc(&slot, 32u); tlx_tcgen05_relinquish_alloc_permit(); }\n"
               "  __syncthreads(); out[0] = slot;")


# fp8 register-A helpers compiled at these N only: the same template as every N of the 16-bit ones
# (compiled at all N), which differ in the register list alone; 128 more NVRTC compiles cost ~20
# CPU-seconds of the README's test command
_RS8_COMPILED = (8, 24, 128, 256)


def _wgmma_rs(n: int, dtype: str, b_dtype: str | None = None) -> Case:
    regs = n // 2
    ptx_type, k, transposable = ptx.WGMMA_INPUTS[dtype]
    b_ptx_type = ptx.WGMMA_INPUTS[b_dtype or dtype][0]
    major = f"<{n % 16 // 8}>" if transposable else ""
    body = (_WGMMA_PROBE + f"  float d[{regs}];\n  for (int k = 0; k < {regs}; ++k) d[k] = 0.0f;\n"
            f"  tlx_wgmma_fence();\n  {ptx.wgmma_name(n, dtype, b_dtype)}_rs{major}(d, in[1], in[2], in[3], in[4], "
            f"db, in[0] != 0);\n  tlx_wgmma_commit_group();\n  tlx_wgmma_wait_group<0, {regs}>(d);\n"
            f"  for (int k = 0; k < {regs}; ++k) out[{regs} * threadIdx.x + k] = __float_as_uint(d[k]);")
    compiled = transposable or n in _RS8_COMPILED
    return Case(body, (f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}.{b_ptx_type}",),
                archs=("sm_90a",) if compiled else (), also=_WGMMA_HELPERS, bounds="__launch_bounds__(128, 1) ")


def _wgmma(n: int, dtype: str, b_dtype: str | None = None) -> Case:
    regs = n // 2
    ptx_type, k, transposable = ptx.WGMMA_INPUTS[dtype]
    b_ptx_type = ptx.WGMMA_INPUTS[b_dtype or dtype][0]
    majors = f"<0, {n % 16 // 8}>" if transposable else ""
    body = (_WGMMA_PROBE + f"  float d[{regs}];\n  for (int k = 0; k < {regs}; ++k) d[k] = 0.0f;\n"
            f"  tlx_wgmma_fence();\n  {ptx.wgmma_name(n, dtype, b_dtype)}{majors}(d, da, db, in[0] != 0);\n"
            f"  tlx_wgmma_commit_group();\n  tlx_wgmma_wait_group<0, {regs}>(d);\n"
            f"  for (int k = 0; k < {regs}; ++k) out[{regs} * threadIdx.x + k] = __float_as_uint(d[k]);")
    return Case(body, (f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx_type}.{b_ptx_type}", "wgmma.fence.sync.aligned",
                       "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0"),
                archs=("sm_90a",), also=_WGMMA_HELPERS, bounds="__launch_bounds__(128, 1) ")


def _atom(op: str, ptx_type: str) -> Case:
    """Every (sem, scope) instantiation of one atom helper; each old value reaches ``out``."""
    ctype = ptx.ATOM_TYPES[ptx_type][0]
    name = ptx.atom_name(op, ptx_type)
    args = "(" + ctype + ")in[1], (" + ctype + ")in[2]" if op == "cas" else "(" + ctype + ")in[1]"
    calls, mnemonics = [], []
    for i, sem in enumerate(ptx.ATOM_SEMS):
        for j, scope in enumerate(ptx.ATOM_SCOPES):
            slot = 3 * i + j
            calls.append(f"out[{slot}] = (unsigned){name}<{i}, {j}>(out + 16 + 2 * {slot}, {args});")
            mnemonics.append(ptx.atom_instruction(op, ptx_type, sem, scope))
    return Case("\n  ".join(calls), tuple(mnemonics))


_ATOM_CASES = {ptx.atom_name(op, t): _atom(op, t) for op, types in ptx.ATOM_OPS.items() for t in types}


# -- cache hints: every (cache operator, eviction policy) instantiation in one probe, so that
# ptxas checks each spelling the template can produce
def _hint_words(bits: int) -> tuple[str, int]:
    return ("unsigned short", 1) if bits < 32 else ("unsigned", bits // 32)


def _hint_vec(bits: int) -> str:
    return f"u{bits}" if bits < 32 else {1: "b32", 2: "v2.b32", 4: "v4.b32"}[bits // 32]


def _hinted_load(bits: int) -> Case:
    ctype, words = _hint_words(bits)
    names = ", ".join(f"w{k}" for k in range(words))
    lines = []
    for c in range(len(ptx.LD_CACHE_OPS)):
        for e in range(len(ptx.EVICTIONS)):
            lines.append(f"{{ {ctype} {', '.join(f'w{k} = {k}' for k in range(words))}; "
                         f"tlx_ld_global_hint_b{bits}<{c}, {e}>(in + 4 * threadIdx.x + {c * 3 + e}, in[0] != 0, "
                         f"{names}); out[{c * 3 + e}] = {' + '.join(f'w{k}' for k in range(words))}; }}")
    vec = _hint_vec(bits)
    mnemonics = tuple(f"ld.global{ptx.access_qualifiers(cache, evict)}.{vec}"
                      for cache in ptx.LD_CACHE_OPS for evict in ptx.EVICTIONS)
    return Case("\n  ".join(lines), mnemonics + ("createpolicy.fractional.L2::evict_first.b64",),
                also=("tlx_l2_policy",))


def _hinted_store(bits: int) -> Case:
    ctype, words = _hint_words(bits)
    lines = []
    for c in range(len(ptx.ST_CACHE_OPS)):
        for e in range(len(ptx.EVICTIONS)):
            values = ", ".join(f"({ctype})in[{k + c}]" for k in range(words))
            lines.append(f"tlx_st_global_hint_b{bits}<{c}, {e}>(out + 4 * threadIdx.x + {c * 3 + e}, in[7] != 0, "
                         f"{values});")
    vec = _hint_vec(bits)
    mnemonics = tuple(f"st.global{ptx.access_qualifiers(cache, evict)}.{vec}"
                      for cache in ptx.ST_CACHE_OPS for evict in ptx.EVICTIONS)
    return Case("\n  ".join(lines), mnemonics, also=("tlx_l2_policy",))


def _volatile_load(bits: int) -> Case:
    ctype, words = _hint_words(bits)
    names = ", ".join(f"w{k}" for k in range(words))
    body = (f"{ctype} {', '.join(f'w{k} = {k}' for k in range(words))}; "
            f"tlx_ld_volatile_global_b{bits}(in + 4 * threadIdx.x, in[0] != 0, {names}); "
            f"out[threadIdx.x] = {' + '.join(f'w{k}' for k in range(words))};")
    return Case(body, (f"ld.volatile.global.{_hint_vec(bits)}",))


def _cp_async_hinted(nbytes: int) -> Case:
    """Each cache operator of a hinted cp.async helper (no L2-policy form: rules_tlx._cp_async_hints)."""
    words = nbytes // 4
    caches = ptx.CP_ASYNC_CACHE_OPS if nbytes == 16 else ptx.CP_ASYNC_CACHE_OPS[:1]
    copies = " ".join(f"tlx_cp_async_hint_{nbytes}<{c}>(&buf[{words} * threadIdx.x + {128 * words * c}], "
                      f"in + {words} * threadIdx.x, in[0] != 0);" for c in range(len(caches)))
    body = (f"__shared__ __align__(16) unsigned buf[{2 * 128 * words}];\n  {copies}\n"
            "  tlx_cp_async_commit_group();\n  tlx_cp_async_wait_group<0>();\n  __syncthreads();\n"
            "  out[threadIdx.x] = buf[threadIdx.x ^ 1] + buf[threadIdx.x + 128];")
    mnemonics = tuple(f"cp.async.{cache}.shared.global " for cache in caches)
    return Case(body, mnemonics, also=("tlx_cp_async_commit_group", "tlx_cp_async_wait_group"))


def _tma_hinted(kind: str, rank: int) -> Case:
    """Both L2 policies (evict_first, evict_last) of a hinted TMA helper."""
    coords = ", ".join(f"(int)in[{i}]" for i in range(rank))
    buf = "__shared__ __attribute__((aligned(128))) float buf[256]; "
    if kind == "prefetch":
        calls = [f"tlx_tma_prefetch_hint_{rank}d<{e}>(in + 64, {coords});" for e in (1, 2)]
        return Case(" ".join(calls) + " out[0] = 1u;",
                    (f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile.L2::cache_hint",), also=("tlx_l2_policy",))
    if kind in ("load", "load_multicast"):
        mask = "(unsigned short)3, " if kind == "load_multicast" else ""
        calls = [f"tlx_tma_{kind}_hint_{rank}d<{e}>(buf, in + 64, &bar, {mask}{coords});" for e in (1, 2)]
        suffix = ".multicast::cluster" if mask else ""
        instruction = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes{suffix}"
        return Case(buf + _BAR + " ".join(calls) + " out[0] = __float_as_uint(buf[threadIdx.x]);",
                    (instruction + ".L2::cache_hint",), also=("tlx_l2_policy",))
    if kind == "store":
        calls = [f"tlx_tma_store_hint_{rank}d<{e}>(in + 64, buf, {coords});" for e in (1, 2)]
        mnemonics = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group.L2::cache_hint",)
    else:
        calls = [f"tlx_tma_reduce_hint_{rank}d<{k}, {1 + k % 2}>(in + 64, buf, {coords});"
                 for k in range(len(ptx.TMA_REDUCE_OPS))]
        mnemonics = tuple(f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op}.tile.bulk_group.L2::cache_hint"
                          for op in ptx.TMA_REDUCE_OPS)
    body = (buf + "buf[threadIdx.x & 255] = 1.0f; " + " ".join(calls) +
            " tlx_bulk_commit_group(); tlx_bulk_wait_group_read<0>(); out[0] = 1u;")
    return Case(body, mnemonics, also=("tlx_bulk_commit_group", "tlx_bulk_wait_group_read", "tlx_l2_policy"))


_HINT_CASES = {
    "tlx_l2_policy": Case("out[0] = (unsigned)tlx_l2_policy<1>(); out[1] = (unsigned)tlx_l2_policy<2>();",
                          ("createpolicy.fractional.L2::evict_first.b64", "createpolicy.fractional.L2::evict_last.b64")),
    **{f"tlx_ld_global_hint_b{b}": _hinted_load(b) for b in ptx.HINT_BITS},
    **{f"tlx_st_global_hint_b{b}": _hinted_store(b) for b in ptx.HINT_BITS},
    **{f"tlx_ld_volatile_global_b{b}": _volatile_load(b) for b in ptx.HINT_BITS},
    **{f"tlx_cp_async_hint_{n}": _cp_async_hinted(n) for n in (4, 8, 16)},
    **{f"tlx_tma_{kind}_hint_{r}d": _tma_hinted(kind, r) for kind in ("load", "load_multicast", "store", "reduce",
                                                                      "prefetch") for r in range(1, 6)},
}


CASES: dict[str, Case] = {
    **_ATOM_CASES,
    **_HINT_CASES,
    # an empty asm emits no instruction: the case checks that it compiles and keeps the value
    "tlx_pin_registers": Case("unsigned r[2] = {in[0], in[1]}; tlx_pin_registers<2>(r); out[0] = r[0] + r[1];",
                              ()),
    # an identity byte permute per register (the value is unchanged; the prmt must stay in the PTX)
    "tlx_fresh_registers": Case("unsigned r[2] = {in[0], in[1]}; tlx_fresh_registers<2>(r); out[0] = r[0] ^ r[1];",
                                ("prmt.b32",)),
    "tlx_opaque_pointer": Case("const unsigned* p = tlx_opaque_pointer(in); out[0] = p[1];", ()),
    **{name: Case("__shared__ __align__(16) unsigned buf[4 * 64]; buf[threadIdx.x & 255] = in[threadIdx.x];\n"
                  "  __syncthreads(); unsigned w0, w1, w2, w3;\n"
                  f"  {name}(buf + 4 * (threadIdx.x & 31), w0, w1, w2, w3); out[threadIdx.x] = w0 ^ w1 ^ w2 ^ w3;",
                  (mnemonic,), archs=("sm_80", "sm_90a", "sm_100a"), also=("tlx_smem_addr",))
      for name, mnemonic in (("tlx_ldmatrix_x4", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"),
                             ("tlx_ldmatrix_x4_trans", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"))},
    "tlx_cvt_f32_f16": Case("out[0] = __float_as_uint(tlx_cvt_f32_f16((unsigned short)in[0]));",
                            ("cvt.f32.f16",)),
    "tlx_cvt_rn_f16_f32": Case("out[0] = tlx_cvt_rn_f16_f32(__uint_as_float(in[0]));", ("cvt.rn.f16.f32",)),
    # no asm: widening bf16 is a 16-bit shift, which must stay a single shl
    "tlx_bf16_to_f32": Case("out[0] = __float_as_uint(tlx_bf16_to_f32((unsigned short)in[0]));",
                            ("shl.b32",), absent=("cvt.",)),
    "tlx_cvt_rn_bf16_f32": Case("out[0] = tlx_cvt_rn_bf16_f32(__uint_as_float(in[0]));", ("cvt.rn.bf16.f32",)),
    "tlx_cvt_rn_satfinite_e4m3_f32": Case("out[0] = tlx_cvt_rn_satfinite_e4m3_f32(__uint_as_float(in[0]));",
                                          ("cvt.rn.satfinite.e4m3x2.f32",)),
    "tlx_cvt_rn_satfinite_e5m2_f32": Case("out[0] = tlx_cvt_rn_satfinite_e5m2_f32(__uint_as_float(in[0]));",
                                          ("cvt.rn.satfinite.e5m2x2.f32",)),
    "tlx_cvt_f16x2_e4m3x2": Case("out[0] = tlx_cvt_f16x2_e4m3x2((unsigned short)in[0]);",
                                 ("cvt.rn.f16x2.e4m3x2",)),
    "tlx_cvt_f16x2_e5m2x2": Case("out[0] = tlx_cvt_f16x2_e5m2x2((unsigned short)in[0]);",
                                 ("cvt.rn.f16x2.e5m2x2",)),
    "tlx_e4m3_to_f32": Case("out[0] = __float_as_uint(tlx_e4m3_to_f32((unsigned char)in[0]));",
                            ("cvt.rn.f16x2.e4m3x2", "cvt.f32.f16")),
    "tlx_e5m2_to_f32": Case("out[0] = __float_as_uint(tlx_e5m2_to_f32((unsigned char)in[0]));",
                            ("cvt.rn.f16x2.e5m2x2", "cvt.f32.f16")),
    "tlx_cvt_rna_tf32_f32": Case("out[0] = __float_as_uint(tlx_cvt_rna_tf32_f32(__uint_as_float(in[0])));",
                                 ("cvt.rna.tf32.f32",)),
    "tlx_ex2_approx_ftz_f32": Case("out[0] = __float_as_uint(tlx_ex2_approx_ftz_f32(__uint_as_float(in[0])));",
                                   ("ex2.approx.ftz.f32",)),
    # no slow-path subroutine: that call is what the approximations avoid
    "tlx_div_full_f32": Case("out[0] = __float_as_uint(tlx_div_full_f32(__uint_as_float(in[0]), __uint_as_float(in[1])));",
                             ("div.full.f32",), absent=("call", "div.rn")),
    "tlx_sqrt_approx_f32": Case("out[0] = __float_as_uint(tlx_sqrt_approx_f32(__uint_as_float(in[0])));",
                                ("sqrt.approx.f32",), absent=("call", "sqrt.rn", ".ftz")),
    # no instruction of its own: the memcpy must fold to a register move
    "tlx_bitcast": Case("out[0] = tlx_bitcast<unsigned>(__uint_as_float(in[0]) * 2.0f);",
                        ("add.f32",), absent=(".local", "call")),
    "tlx_ld_shared_b32": _shared(32, False),
    "tlx_ld_shared_b64": _shared(64, False),
    "tlx_ld_shared_b128": _shared(128, False),
    "tlx_st_shared_b32": _shared(32, True),
    "tlx_st_shared_b64": _shared(64, True),
    "tlx_st_shared_b128": _shared(128, True),
    "tlx_ld_global_b32": _load(32),
    "tlx_ld_global_b64": _load(64),
    "tlx_ld_global_b128": _load(128),
    "tlx_st_global_b32": _store(32),
    "tlx_st_global_b64": _store(64),
    "tlx_st_global_b128": _store(128),
    "tlx_mma_m16n8k16_f32_bf16": _mma("bf16"),
    "tlx_mma_m16n8k16_f32_f16": _mma("f16"),
    "tlx_mma_m16n8k32_s32_s8": Case(
        "int d[4] = {0, 0, 0, 0}; unsigned a[4], b[2];\n"
        "  for (int k = 0; k < 4; ++k) a[k] = in[k];\n"
        "  for (int k = 0; k < 2; ++k) b[k] = in[4 + k];\n"
        "  tlx_mma_m16n8k32_s32_s8(d, a, b);\n"
        "  for (int k = 0; k < 4; ++k) out[4 * threadIdx.x + k] = (unsigned)d[k];",
        ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",)),
    "tlx_mma_m16n8k8_f32_tf32": Case(
        "float d[4] = {0.f, 0.f, 0.f, 0.f}, a[4], b[2];\n"
        "  for (int k = 0; k < 4; ++k) a[k] = __uint_as_float(in[k]);\n"
        "  for (int k = 0; k < 2; ++k) b[k] = __uint_as_float(in[4 + k]);\n"
        "  tlx_mma_m16n8k8_f32_tf32(d, a, b);\n"
        "  for (int k = 0; k < 4; ++k) out[4 * threadIdx.x + k] = __float_as_uint(d[k]);",
        ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",)),
    # shared memory, mbarriers, named barriers, fences
    # NVVM sees through __cvta_generic_to_shared: the address of a shared array's element is
    # 32-bit arithmetic on the array's own shared address (a move of its symbol, ``..E3buf;``),
    # no cvta.to.shared of a 64-bit generic pointer
    "tlx_smem_addr": Case("__shared__ unsigned buf[32];\n  out[0] = tlx_smem_addr(&buf[threadIdx.x & 31]);",
                          ("E3buf;",)),
    "tlx_mbarrier_init": Case(_BAR + "tlx_mbarrier_init(&bar, in[0]); out[0] = (unsigned)bar;",
                              ("mbarrier.init.shared::cta.b64",)),
    "tlx_mbarrier_try_wait_parity": Case(_BAR + "out[0] = tlx_mbarrier_try_wait_parity(&bar, in[0]);",
                                         ("mbarrier.try_wait.parity.shared::cta.b64",)),
    "tlx_mbarrier_wait": Case(_BAR + "tlx_mbarrier_wait(&bar, in[0]); out[0] = 1u;",
                              ("mbarrier.try_wait.parity.shared::cta.b64",)),
    "tlx_mbarrier_try_wait_parity_suspend": Case(
        _BAR + "out[0] = tlx_mbarrier_try_wait_parity_suspend(&bar, in[0], in[1]);",
        ("mbarrier.try_wait.parity.shared::cta.b64",)),
    "tlx_mbarrier_wait_suspend": Case(_BAR + "tlx_mbarrier_wait_suspend(&bar, in[0], 20000u); out[0] = 1u;",
                                      ("mbarrier.try_wait.parity.shared::cta.b64",)),
    **{f"tlx_tma_load_{r}d": _tma(r, False) for r in range(1, 6)},
    **{f"tlx_tma_store_{r}d": _tma(r, True) for r in range(1, 6)},
    **{f"tlx_tma_reduce_{k}_{r}d": _tma_reduce(k, r) for k in ptx.TMA_REDUCE_OPS for r in range(1, 6)},
    **{f"tlx_tma_load_multicast_{r}d": _tma_multicast(r) for r in range(1, 6)},
    **{f"tlx_tma_prefetch_{r}d": _tma_prefetch(r) for r in range(1, 6)},
    # clusters
    "tlx_cluster_ctarank": Case("out[0] = (unsigned)tlx_cluster_ctarank();", ("%cluster_ctarank",)),
    "tlx_cluster_nctarank": Case("out[0] = (unsigned)tlx_cluster_nctarank();", ("%cluster_nctarank",)),
    "tlx_cluster_arrive": Case("tlx_cluster_arrive(); tlx_cluster_wait(); out[0] = 1u;",
                               ("barrier.cluster.arrive.release.aligned",), also=("tlx_cluster_wait",)),
    "tlx_cluster_wait": Case("tlx_cluster_arrive(); tlx_cluster_wait(); out[0] = 1u;",
                             ("barrier.cluster.wait.acquire.aligned",), also=("tlx_cluster_arrive",)),
    "tlx_fence_mbarrier_init_cluster": Case("tlx_fence_mbarrier_init_cluster(); out[0] = 1u;",
                                            ("fence.mbarrier_init.release.cluster",)),
    "tlx_mapa_shared": Case("__shared__ unsigned buf[32]; buf[threadIdx.x & 31] = in[0];\n"
                            "  out[0] = tlx_mapa_shared(&buf[threadIdx.x & 31], (int)in[1]);",
                            ("mapa.shared::cluster.u32",)),
    "tlx_mbarrier_arrive_cluster": Case(_BAR + "tlx_mbarrier_arrive_cluster(tlx_mapa_shared(&bar, (int)in[0]), 1u); "
                                        "out[0] = 1u;", ("mbarrier.arrive.shared::cluster.b64",),
                                        also=("tlx_mapa_shared",)),
    # distributed shared memory (rules_cluster.py) and warp votes (rules_warp.py)
    **{f"tlx_st_shared_cluster_b{bits}": Case(
        f"__shared__ {ctype} buf[32]; tlx_st_shared_cluster_b{bits}(tlx_mapa_shared(&buf[threadIdx.x & 31], "
        f"(int)in[0]), ({ctype})in[1]); __syncthreads(); out[0] = (unsigned)buf[threadIdx.x & 31];",
        (f"st.shared::cluster.b{bits}",), also=("tlx_mapa_shared",))
       for bits, ctype in ((8, "unsigned char"), (16, "unsigned short"), (32, "unsigned"),
                           (64, "unsigned long long"))},
    **{f"tlx_st_async_cluster_b{bits}": Case(
        f"__shared__ {ctype} buf[32]; " + _BAR + f"tlx_st_async_cluster_b{bits}(tlx_mapa_shared(&buf[threadIdx.x & 31], "
        f"(int)in[0]), ({ctype})in[1], tlx_mapa_shared(&bar, (int)in[0])); out[0] = (unsigned)buf[0];",
        (f"st.async.shared::cluster.mbarrier::complete_tx::bytes.b{bits}",), also=("tlx_mapa_shared",))
       for bits, ctype in ((32, "unsigned"), (64, "unsigned long long"))},
    "tlx_cp_async_bulk_cluster": Case(
        "__shared__ __attribute__((aligned(128))) unsigned buf[64]; " + _BAR +
        "tlx_cp_async_bulk_cluster(tlx_mapa_shared(buf, (int)in[0]), buf, 256u, tlx_mapa_shared(&bar, (int)in[0])); "
        "out[0] = buf[threadIdx.x & 63];",
        ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes",), also=("tlx_mapa_shared",)),
    "tlx_vote_ballot_sync": Case("out[threadIdx.x] = tlx_vote_ballot_sync(in[0], in[threadIdx.x] > 3u);",
                                 ("vote.sync.ballot.b32",)),
    "tlx_bulk_commit_group": Case("tlx_bulk_commit_group(); out[0] = 1u;", ("cp.async.bulk.commit_group",)),
    "tlx_bulk_wait_group_read": Case("tlx_bulk_wait_group_read<1>(); out[0] = 1u;",
                                     ("cp.async.bulk.wait_group.read",)),
    # bulk copies (non-tensor cp.async.bulk) and prefetch hints
    "tlx_bulk_load": Case("__shared__ __attribute__((aligned(128))) unsigned buf[64]; " + _BAR +
                          "tlx_bulk_load(buf, in + 64, 256u, &bar); out[0] = buf[threadIdx.x & 63];",
                          ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",)),
    "tlx_bulk_load_hint": Case("__shared__ __attribute__((aligned(128))) unsigned buf[64]; " + _BAR +
                               "tlx_bulk_load_hint<1>(buf, in + 64, 256u, &bar); "
                               "tlx_bulk_load_hint<2>(buf, in + 128, 256u, &bar); out[0] = buf[threadIdx.x & 63];",
                               ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint",),
                               also=("tlx_l2_policy",)),
    "tlx_bulk_store": Case("__shared__ __attribute__((aligned(128))) unsigned buf[64]; buf[threadIdx.x & 63] = in[0]; "
                           "tlx_bulk_store(out + 64, buf, 256u); tlx_bulk_commit_group(); "
                           "tlx_bulk_wait_group_read<0>(); out[0] = 1u;",
                           ("cp.async.bulk.global.shared::cta.bulk_group",),
                           also=("tlx_bulk_commit_group", "tlx_bulk_wait_group_read")),
    "tlx_prefetch_global_L1": Case("tlx_prefetch_global_L1(in + threadIdx.x); out[0] = in[threadIdx.x];",
                                   ("prefetch.global.L1",)),
    "tlx_prefetch_global_L2": Case("tlx_prefetch_global_L2(in + threadIdx.x); out[0] = in[threadIdx.x];",
                                   ("prefetch.global.L2",)),
    "tlx_prefetch_tensormap": Case("tlx_prefetch_tensormap(in + 64); out[0] = 1u;", ("prefetch.tensormap",),
                                   absent=("prefetch.param.tensormap", "prefetch.global.tensormap")),
    "tlx_globaltimer": Case("out[0] = (unsigned)tlx_globaltimer();", ("%globaltimer",)),
    # tensor maps encoded in the kernel: one case per field (ordinals and immediates as templates)
    "tlx_tensormap_replace_global_address": Case("tlx_tensormap_replace_global_address(out, (unsigned long long)in);",
                                                 ("tensormap.replace.tile.global_address.global.b1024.b64",)),
    "tlx_tensormap_replace_rank": Case("tlx_tensormap_replace_rank(out, in[0]);",
                                       ("tensormap.replace.tile.rank.global.b1024.b32",)),
    "tlx_tensormap_replace_box_dim": Case("tlx_tensormap_replace_box_dim<1>(out, in[0]);",
                                          ("tensormap.replace.tile.box_dim.global.b1024.b32",)),
    "tlx_tensormap_replace_global_dim": Case("tlx_tensormap_replace_global_dim<0>(out, in[0]);",
                                             ("tensormap.replace.tile.global_dim.global.b1024.b32",)),
    "tlx_tensormap_replace_global_stride": Case(
        "tlx_tensormap_replace_global_stride<0>(out, (unsigned long long)in[0] * 16);",
        ("tensormap.replace.tile.global_stride.global.b1024.b64",)),
    "tlx_tensormap_replace_element_stride": Case("tlx_tensormap_replace_element_stride<2>(out, 1u);",
                                                 ("tensormap.replace.tile.element_stride.global.b1024.b32",)),
    "tlx_tensormap_replace_elemtype": Case("tlx_tensormap_replace_elemtype<6>(out);",
                                           ("tensormap.replace.tile.elemtype.global.b1024.b32",)),
    "tlx_tensormap_replace_interleave_layout": Case("tlx_tensormap_replace_interleave_layout<0>(out);",
                                                    ("tensormap.replace.tile.interleave_layout.global.b1024.b32",)),
    "tlx_tensormap_replace_swizzle_mode": Case("tlx_tensormap_replace_swizzle_mode<3>(out);",
                                               ("tensormap.replace.tile.swizzle_mode.global.b1024.b32",)),
    "tlx_tensormap_replace_fill_mode": Case("tlx_tensormap_replace_fill_mode<1>(out);",
                                            ("tensormap.replace.tile.fill_mode.global.b1024.b32",)),
    "tlx_fence_tensormap_release": Case("out[0] = in[0]; tlx_fence_tensormap_release();",
                                        ("fence.proxy.tensormap::generic.release.gpu",)),
    "tlx_fence_tensormap_acquire": Case("tlx_fence_tensormap_acquire(in); out[0] = 1u;",
                                        ("fence.proxy.tensormap::generic.acquire.gpu",)),
    "tlx_mbarrier_wait_watchdog": Case(
        _BAR + 'tlx_mbarrier_wait_watchdog(&bar, in[0], in[1], 1000ull, "k.py:1", "main", "bars", 0); out[0] = 1u;',
        ("mbarrier.try_wait.parity.shared::cta.b64", "%globaltimer", "trap")),
    "tlx_mbarrier_arrive": Case(_BAR + "tlx_mbarrier_arrive(&bar, in[0]); out[0] = 1u;",
                                ("mbarrier.arrive.release.cta.shared::cta.b64",)),
    "tlx_mbarrier_complete_tx": Case(_BAR + "if (threadIdx.x == 0) tlx_mbarrier_complete_tx(&bar, in[0]); out[0] = 1u;",
                                     ("mbarrier.complete_tx.relaxed.cta.shared::cta.b64",)),
    "tlx_mbarrier_arrive_expect_tx": Case(_BAR + "tlx_mbarrier_arrive_expect_tx(&bar, in[0]); out[0] = 1u;",
                                          ("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",)),
    "tlx_bar_sync": Case("tlx_bar_sync(1, 128); out[threadIdx.x] = in[threadIdx.x];", ("bar.sync",)),
    "tlx_bar_arrive": Case("tlx_bar_arrive(1, 128); out[threadIdx.x] = in[threadIdx.x];", ("bar.arrive",)),
    "tlx_fence_proxy_async_shared_cta": Case("out[0] = in[0]; tlx_fence_proxy_async_shared_cta(); out[1] = in[1];",
                                             ("fence.proxy.async.shared::cta",)),
    "tlx_fence_acq_rel_gpu": Case("out[0] = in[0]; tlx_fence_acq_rel_gpu(); out[1] = in[1];",
                                  ("fence.acq_rel.gpu",)),
    "tlx_griddepcontrol_wait": Case("tlx_griddepcontrol_wait(); out[0] = in[0];", ("griddepcontrol.wait",)),
    "tlx_griddepcontrol_launch_dependents": Case("out[0] = in[0]; tlx_griddepcontrol_launch_dependents();",
                                                 ("griddepcontrol.launch_dependents",)),
    "tlx_fence_acq_rel_sys": Case("out[0] = in[0]; tlx_fence_acq_rel_sys(); out[1] = in[1];",
                                  ("fence.acq_rel.sys",)),
    # cp.async
    "tlx_cp_async_4": _cp_async(4),
    "tlx_cp_async_8": _cp_async(8),
    "tlx_cp_async_16": _cp_async(16),
    "tlx_cp_async_commit_group": Case("tlx_cp_async_commit_group(); out[0] = in[0];", ("cp.async.commit_group",)),
    "tlx_cp_async_wait_group": Case("tlx_cp_async_wait_group<1>(); out[0] = in[0];", ("cp.async.wait_group 1",)),
    # register reallocation (warp-specialized kernels)
    "tlx_setmaxnreg_inc": Case("tlx_setmaxnreg_inc<240>(); out[threadIdx.x] = in[threadIdx.x];",
                               ("setmaxnreg.inc.sync.aligned.u32 240",), bounds="__launch_bounds__(256, 1) "),
    "tlx_setmaxnreg_dec": Case("tlx_setmaxnreg_dec<40>(); out[threadIdx.x] = in[threadIdx.x];",
                               ("setmaxnreg.dec.sync.aligned.u32 40",), bounds="__launch_bounds__(256, 1) "),
    # wgmma (sm_90a only): every shape and input type, A from shared memory or (16-bit) registers
    **{ptx.wgmma_name(n, t): _wgmma(n, t) for t in ptx.WGMMA_INPUTS for n in ptx.WGMMA_N},
    **{ptx.wgmma_name(n, t) + "_rs": _wgmma_rs(n, t) for t in ("bf16", "f16", "f8e4m3", "f8e5m2")
       for n in ptx.WGMMA_N},
    **{ptx.wgmma_name(n, a, b): _wgmma(n, a, b) for a, b in ptx.WGMMA_MIXED for n in ptx.WGMMA_N},
    **{ptx.wgmma_name(n, a, b) + "_rs": _wgmma_rs(n, a, b) for a, b in ptx.WGMMA_MIXED for n in ptx.WGMMA_N},
    **{f"tlx_cvt_rn_satfinite_{t}x4_f32": Case(
        f"out[threadIdx.x] = tlx_cvt_rn_satfinite_{t}x4_f32(__uint_as_float(in[0]), __uint_as_float(in[1]), "
        f"__uint_as_float(in[2]), __uint_as_float(in[3]));", (f"cvt.rn.satfinite.{t}x2.f32",), archs=("sm_90a",))
       for t in ("e4m3", "e5m2")},
    "tlx_exp2_fma_f32": Case("out[0] = __float_as_uint(tlx_exp2_fma_f32(__uint_as_float(in[0])));",
                             ("fma.rn.f32",), absent=("ex2.",)),
    "tlx_wgmma_a8_fragment": Case("unsigned a[4]; tlx_wgmma_a8_fragment(in[threadIdx.x], in[threadIdx.x + 1], "
                                  "in[threadIdx.x + 2], in[threadIdx.x + 3], a);\n"
                                  "  for (int k = 0; k < 4; ++k) out[4 * threadIdx.x + k] = a[k];",
                                  ("shfl.sync.idx.b32", "prmt.b32")),
    "tlx_wgmma_fence": Case("tlx_wgmma_fence(); out[0] = in[0];", ("wgmma.fence.sync.aligned",), archs=("sm_90a",)),
    "tlx_wgmma_commit_group": Case("tlx_wgmma_commit_group(); out[0] = in[0];", ("wgmma.commit_group.sync.aligned",),
                                   archs=("sm_90a",)),
    "tlx_wgmma_wait_group": Case("float d[2] = {__uint_as_float(in[0]), 1.0f}; tlx_wgmma_wait_group<1, 2>(d); "
                                 "out[0] = __float_as_uint(d[0] + d[1]);", ("wgmma.wait_group.sync.aligned 1",),
                                 archs=("sm_90a",)),
    "tlx_wgmma_desc": Case("__shared__ unsigned buf[32]; out[0] = (unsigned)(tlx_wgmma_desc(buf, (in[0] & 31) * 16u, "
                           "1ull << 62));", ("E3buf;", "shr.u32")),         # 32-bit shared address (tlx_smem_addr)
    # tcgen05 (sm_100a only): tensor memory, the three MMA kinds, commit, ld/st of every width, waits, fences
    "tlx_tcgen05_alloc": Case(_TMEM_ALLOC, ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",),
                              archs=_SM100, also=("tlx_tcgen05_relinquish_alloc_permit",)),
    "tlx_tcgen05_relinquish_alloc_permit": Case(_TMEM_ALLOC,
                                                ("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",),
                                                archs=_SM100, also=("tlx_tcgen05_alloc",)),
    "tlx_tcgen05_dealloc": Case("if (threadIdx.x < 32) tlx_tcgen05_dealloc(in[0], 32u); out[0] = 1u;",
                                ("tcgen05.dealloc.cta_group::1.sync.aligned.b32",), archs=_SM100),
    "tlx_tcgen05_fence_before_thread_sync": Case(
        "out[0] = in[0]; tlx_tcgen05_fence_before_thread_sync(); out[1] = in[1];",
        ("tcgen05.fence::before_thread_sync",), archs=_SM100),
    "tlx_tcgen05_fence_after_thread_sync": Case(
        "out[0] = in[0]; tlx_tcgen05_fence_after_thread_sync(); out[1] = in[1];",
        ("tcgen05.fence::after_thread_sync",), archs=_SM100),
    **{f"tlx_tcgen05_mma_{kind}": _tcgen05_mma(kind) for kind in ptx.TCGEN05_KINDS},
    **{f"tlx_tcgen05_mma_cg2_{kind}": _tcgen05_mma(kind, 2) for kind in ptx.TCGEN05_KINDS},
    **{f"tlx_tcgen05_mma_tmem_a_{kind}": _tcgen05_mma_tmem_a(kind) for kind in ptx.TCGEN05_KINDS},
    "tlx_tcgen05_alloc_cg2": Case(_TMEM_ALLOC_CG2, ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",),
                                  archs=_SM100, also=("tlx_tcgen05_relinquish_alloc_permit_cg2",), bounds=_PAIR),
    "tlx_tcgen05_relinquish_alloc_permit_cg2": Case(
        _TMEM_ALLOC_CG2, ("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned",), archs=_SM100,
        also=("tlx_tcgen05_alloc_cg2",), bounds=_PAIR),
    "tlx_tcgen05_dealloc_cg2": Case("if (threadIdx.x < 32) tlx_tcgen05_dealloc_cg2(in[0], 32u); out[0] = 1u;",
                                    ("tcgen05.dealloc.cta_group::2.sync.aligned.b32",), archs=_SM100, bounds=_PAIR),
    "tlx_tcgen05_commit_cg2": Case(
        _BAR + "if (threadIdx.x == 0) tlx_tcgen05_commit_cg2(&bar, (unsigned short)in[0]); out[0] = 1u;",
        ("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",),
        archs=_SM100, bounds=_PAIR),
    "tlx_tcgen05_commit": Case(_BAR + "if (threadIdx.x == 0) tlx_tcgen05_commit(&bar); out[0] = 1u;",
                               ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",),
                               archs=_SM100),
    **{f"tlx_tcgen05_ld_32x32b_x{n}": _tcgen05_ld(n) for n in ptx.TCGEN05_LDST_NUMS},
    **{f"tlx_tcgen05_ld_16x32bx2_x{n}": _tcgen05_ld_half(n) for n in ptx.TCGEN05_LDST_NUMS},
    **{f"tlx_tcgen05_st_16x32bx2_x{n}": _tcgen05_st_half(n) for n in ptx.TCGEN05_LDST_NUMS},
    "tlx_tcgen05_mma_mxf8f6f4_block_scale": Case(
        "const unsigned long long da = ((unsigned long long)in[1] << 32) | in[2], "
        "db = ((unsigned long long)in[3] << 32) | in[4];\n"
        "  if (threadIdx.x == 0) tlx_tcgen05_mma_mxf8f6f4_block_scale(in[0], da, db, in[5], in[7], in[8], (int)in[6]);\n"
        "  out[0] = 1u;",
        ("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X",), archs=_SM100),
    "tlx_tcgen05_cp_32x128b_warpx4": Case(
        "const unsigned long long src = ((unsigned long long)in[1] << 32) | in[2];\n"
        "  if (threadIdx.x == 0) tlx_tcgen05_cp_32x128b_warpx4(in[0], src); out[0] = 1u;",
        ("tcgen05.cp.cta_group::1.32x128b.warpx4",), archs=_SM100),
    **{f"tlx_tcgen05_st_32x32b_x{n}": _tcgen05_st(n) for n in ptx.TCGEN05_LDST_NUMS},
    "tlx_tcgen05_wait_ld": Case(
        "unsigned r[1]; tlx_tcgen05_ld_32x32b_x1(in[0], r); tlx_tcgen05_wait_ld<1>(r); out[threadIdx.x] = r[0];",
        ("tcgen05.wait::ld.sync.aligned",), archs=_SM100, also=("tlx_tcgen05_ld_32x32b_x1",)),
    # cluster launch control (sm_100a, rules_clc.py): try_cancel into a 16-byte response, the query decodes it
    "tlx_clc_try_cancel": Case(
        "__shared__ __attribute__((aligned(16))) unsigned resp[4]; " + _BAR + "if (threadIdx.x == 0) "
        "tlx_clc_try_cancel(resp, &bar); out[0] = resp[in[0] & 3];",
        ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128",),
        archs=_SM100),
    "tlx_clc_try_cancel_multicast": Case(
        "__shared__ __attribute__((aligned(16))) unsigned resp[4]; " + _BAR + "if (threadIdx.x == 0) "
        "tlx_clc_try_cancel_multicast(resp, &bar); out[0] = resp[in[0] & 3];",
        ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128",),
        archs=_SM100),
    "tlx_clc_query": Case(
        "__shared__ __attribute__((aligned(16))) unsigned resp[4]; resp[threadIdx.x & 3] = in[threadIdx.x & 3]; "
        "__syncthreads(); out[threadIdx.x] = (unsigned)tlx_clc_query(resp);",
        ("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128",
         "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128"), archs=_SM100),
    "tlx_tcgen05_wait_st": Case(
        "unsigned r[1] = {in[1]}; tlx_tcgen05_st_32x32b_x1(in[0], r); tlx_tcgen05_wait_st(); out[0] = 1u;",
        ("tcgen05.wait::st.sync.aligned",), archs=_SM100, also=("tlx_tcgen05_st_32x32b_x1",)),
}
# float -> integer toward zero (saturating; their values: tests/test_float_to_int_casts.py)
for _dst in ("s32", "u32", "s64", "u64"):
    for _src, _arg in (("f32", "__uint_as_float(in[0])"),
                       ("f64", "__longlong_as_double((long long)(((unsigned long long)in[1] << 32) | in[0]))")):
        CASES[f"tlx_cvt_rzi_{_dst}_{_src}"] = Case(
            f"unsigned long long r = (unsigned long long)tlx_cvt_rzi_{_dst}_{_src}({_arg}); "
            "out[0] = (unsigned)r; out[1] = (unsigned)(r >> 32);", (f"cvt.rzi.{_dst}.{_src}",))


def probe_kernel(name: str, entry: str = "probe") -> str:
    case = CASES[name]
    return (f'extern "C" __global__ void {case.bounds}{entry}(unsigned* out, const unsigned* in) {{\n'
            f"  {case.body}\n"
            "}\n")


def probe_source(name: str) -> str:
    return ptx.definitions([name, *CASES[name].also]) + "\n\n" + probe_kernel(name)


def kernel_ptx(text: str, entry: str = "probe") -> str:
    """The PTX of the ``entry`` kernel (from its ``.entry`` to the next one)."""
    start = text.index(f".entry {entry}(")
    end = text.find(".entry ", start + 1)
    return text[start:] if end < 0 else text[start:end]


_BATCHES: dict[str, object] = {}


def _batch(arch: str):
    """Every case of ``arch`` in one translation unit (``probe_<helper>``), compiled once per
    process; the exception instead if the unit does not compile."""
    if arch not in _BATCHES:
        names = sorted(n for n in CASES if arch in CASES[n].archs)
        helpers = sorted({h for n in names for h in (n, *CASES[n].also)})
        source = ptx.definitions(helpers) + "\n\n" + "\n".join(probe_kernel(n, f"probe_{n}") for n in names)
        try:
            _BATCHES[arch] = compile_cuda(source, arch, [f"probe_{n}" for n in names],
                                          reproducer_name=f"probe_all_cases_{arch}", want_ptx=True)
        except Exception as exc:      # noqa: BLE001 -- each case then compiles alone and names its failure
            _BATCHES[arch] = exc
    return _BATCHES[arch]


def test_every_helper_has_a_case():
    missing = sorted(set(ptx.HELPERS) - set(CASES))
    stale = sorted(set(CASES) - set(ptx.HELPERS))
    assert not missing, f"add a case to tests/test_ptx_helpers.py:CASES for {', '.join(missing)}"
    assert not stale, f"CASES names helpers that no longer exist: {', '.join(stale)}"


# one case per (helper, arch its instruction exists on): pairs that could only skip are not generated; the
# cases of one arch share a pytest-xdist group, so one worker compiles their translation unit
@pytest.mark.parametrize(("name", "arch"), [pytest.param(name, arch, marks=pytest.mark.xdist_group(f"ptx_{arch}"))
                                            for name in sorted(CASES) for arch in CASES[name].archs])
def test_helper_compiles_to_its_instruction(name, arch, tmp_path, monkeypatch):
    case = CASES[name]
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))       # reproducers of a failure land here
    result, entry = _batch(arch), f"probe_{name}"
    if isinstance(result, Exception):
        result, entry = compile_cuda(probe_source(name), arch, ["probe"], reproducer_name=f"probe_{name}",
                                     want_ptx=True), "probe"
    assert result.cubin[:4] == b"\x7fELF"
    assert result.resources[entry]["spills_bytes"] == 0
    body = kernel_ptx(result.ptx, entry)
    for mnemonic in case.mnemonics:
        assert mnemonic in body, f"{name} on {arch}: expected '{mnemonic}' in the PTX:\n{body}"
    for text in case.absent:
        assert text not in body, f"{name} on {arch}: did not expect '{text}' in the PTX:\n{body}"


def test_predicated_load_keeps_the_fill_value_when_off():
    """The load helpers take their words as in/out operands ("+r"), so a false
    predicate leaves the caller's fill value in place; "=r" would leave them
    undefined."""
    for bits in (32, 64, 128):
        definition = ptx.HELPERS[f"tlx_ld_global_b{bits}"]
        assert '"+r"(w0)' in definition and '"=r"' not in definition
        assert "@p ld.global" in definition


# -- definitions(): order and determinism -----------------------------------------------------------

def _definition_order(text: str) -> list[str]:
    """Helper names in the order ``text`` defines them."""
    positions = {name: text.find(body) for name, body in ptx.HELPERS.items() if body in text}
    return sorted(positions, key=positions.get)


def test_dependencies_are_known_helpers():
    for name, deps in ptx.DEPENDS.items():
        for dep in deps:
            assert dep in ptx.HELPERS, f"{name} depends on unknown helper {dep}"


@pytest.mark.parametrize("name", sorted(ptx.HELPERS))
def test_definitions_put_dependencies_first(name):
    order = _definition_order(ptx.definitions([name]))
    assert name in order

    def check(helper: str, seen: set[str]) -> None:
        for dep in ptx.DEPENDS[helper]:
            assert dep in order, f"definitions([{name!r}]) lacks {dep}, which {helper} calls"
            assert order.index(dep) < order.index(helper), f"{dep} must be defined before {helper}"
            if dep not in seen:
                seen.add(dep)
                check(dep, seen)
    check(name, set())


def test_definitions_are_deterministic_and_deduplicated():
    names = sorted(ptx.HELPERS)
    forward = ptx.definitions(names)
    assert ptx.definitions(list(reversed(names))) == forward
    assert ptx.definitions(names + names) == forward
    assert ptx.definitions(names) == forward
    for name in names:
        assert forward.count(ptx.HELPERS[name]) == 1
    # a composite helper pulls in exactly its dependencies
    assert _definition_order(ptx.definitions(["tlx_e4m3_to_f32"])) == \
        [n for n in ptx.HELPERS if n in ("tlx_cvt_f32_f16", "tlx_cvt_f16x2_e4m3x2", "tlx_e4m3_to_f32")]
    assert ptx.definitions([]) == ""


def test_definitions_of_everything_compile():
    """All helpers together in one translation unit: no name clashes."""
    source = ptx.definitions(sorted(ptx.HELPERS)) + '\n\nextern "C" __global__ void probe(unsigned* out) { out[0] = 1u; }\n'
    result = compile_cuda(source, "sm_90a", ["probe"], reproducer_name="probe_all")
    assert result.cubin[:4] == b"\x7fELF"


def test_no_inline_asm_outside_ptx_py():
    """STYLE.md: each instruction has one helper in ptx.py; nobody writes asm elsewhere."""
    # C's asm statement, not a Python name such as Triton's `kernel.asm` property (def asm(self))
    pattern = re.compile(r"(?<!def )\basm\s*(volatile\s*)?\(")
    offenders = []
    for path in sorted((ROOT / "tlxc").rglob("*.py")):
        if path == ROOT / "tlxc" / "codegen_nvptx" / "ptx.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "inline asm outside tlxc/codegen_nvptx/ptx.py:\n" + "\n".join(offenders)


# -- user inline PTX (tl.inline_asm_elementwise): ptx.user_inline_asm renders the statement -------
def test_user_inline_asm_renders_triton_operands_in_cuda_syntax():
    stmt = ptx.user_inline_asm('mov.u32 $0, %tid.x; add.s32 $1, $2, $$; // "q"', [("=r", "a"), ("=r", "b")],
                               [("r", "c")], volatile=False)
    assert stmt == 'asm("mov.u32 %0, %%tid.x; add.s32 %1, %2, $; // \\"q\\"" : "=r"(a), "=r"(b) : "r"(c));'
    assert ptx.user_inline_asm("nanosleep.u32 1;", [("=r", "z")], [], volatile=True) == \
        'asm volatile("nanosleep.u32 1;" : "=r"(z));'


@pytest.mark.parametrize("arch", ARCHS)
def test_user_inline_asm_compiles(arch, tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    stmt = ptx.user_inline_asm("{ .reg .b32 t; add.u32 t, $1, $2; shl.b32 $0, t, 1; }", [("=r", "r")],
                               [("r", "in[0]"), ("r", "in[threadIdx.x]")], volatile=True)
    source = ('extern "C" __global__ void probe(unsigned* out, const unsigned* in) {\n'
              f"  unsigned r; {stmt} out[threadIdx.x] = r;\n}}\n")
    result = compile_cuda(source, arch, ["probe"], reproducer_name="probe_user_asm", want_ptx=True)
    assert result.cubin[:4] == b"\x7fELF" and "shl.b32" in kernel_ptx(result.ptx)
