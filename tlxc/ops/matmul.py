"""``tlxc.ops.matmul``: ``a @ b`` with a fused epilogue, a kernel chosen per shape.

    out = activation(((a @ b) * scale_a * scale_b) + bias) + residual,  cast to out_dtype

``a`` is ``[M, K]`` (or ``[..., K]``: leading dimensions are flattened), ``b`` is
``[K, N]``; any strides: a transposed operand (``w.t()`` of an ``nn.Linear`` weight, a
column-major A) is read in place (a K-major descriptor or a transposed shared tile that
wgmma reads through its transpose bit), never copied.  bfloat16/float16 operands (both the
same), or fp8 (e4m3/e5m2, K-major: ``a`` row-major and ``b = w.t()``) with per-tensor or
row-wise float32 scales.  Any M, N >= 0 and K >= 0 (K = 0 gives the epilogue of zeros).

The kernel and its configuration come from ``matmul_configs.choose_config`` (a table of
measured shapes, then rules; docs/ops.md); ``config="<name>"`` forces one,
``config="autotune"`` (or ``TLXC_OPS_AUTOTUNE=1``) times every valid configuration once per
problem key on the GPU and keeps the fastest in ``cache_dir()/ops/matmul.json``.
"""
from __future__ import annotations

import json
import os
import statistics
import threading

import torch

from .. import language as tl
from ..descriptors import TensorDescriptor
from ..errors import TlxcError
from ..runtime.cache import cache_dir, cache_disabled, write_atomically
from . import matmul_configs as cfgs
from .compile_only import CompileOnly
from .kernels.epilogue import ACTIVATIONS, GLU_FIRST, SCALE_NONE, SCALE_TENSOR, SCALE_VECTOR
from .kernels.gemm_dot import gemm_dot_kernel, splitk_reduce_kernel
from .kernels.gemm_ws import gemm_ws_kernel
from .kernels.gemv import gemv_kernel

TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32,
             torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5}
OPERAND_DTYPES = (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
REDUCE_BLOCK = (64, 64)          # tile of the split-K reduction


class _Epilogue:
    """The epilogue's operands as the kernels take them (codes of kernels/epilogue.py)."""

    def __init__(self, scale_a, scale_b, bias, activation, residual):
        self.scale_a, self.scale_b, self.bias, self.residual = scale_a, scale_b, bias, residual
        self.activation = ACTIVATIONS[activation]

    @staticmethod
    def scale_code(s):
        if s is None:
            return SCALE_NONE
        return SCALE_TENSOR if s.numel() == 1 else SCALE_VECTOR

    def flags(self) -> tuple:
        return (self.scale_code(self.scale_a), self.scale_code(self.scale_b), self.bias is not None,
                self.activation, self.residual is not None)

    def kernel_args(self, swap: bool) -> tuple:
        """(scale0, scale1, bias, residual, stride_r0, stride_r1) and the constexprs
        (SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL) for a kernel whose tile rows
        are the problem's rows (``swap=False``) or its columns."""
        s0, s1 = (self.scale_b, self.scale_a) if swap else (self.scale_a, self.scale_b)
        r = self.residual
        r0, r1 = (0, 0) if r is None else ((r.stride(1), r.stride(0)) if swap else (r.stride(0), r.stride(1)))
        bias_dim = -1 if self.bias is None else (0 if swap else 1)
        return ((s0, s1, self.bias, r, r0, r1),
                {"SCALE0": self.scale_code(s0), "SCALE1": self.scale_code(s1), "BIAS_DIM": bias_dim,
                 "ACTIVATION": self.activation, "HAS_RESIDUAL": r is not None})


CPU_SMS = 132          # on the CPU (interpreter, compile_config) the choice models an H200


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return CPU_SMS


def _card(device: torch.device) -> str:
    """The card whose measured rows the choice reads first (``matmul_configs.card_of``; "" on the CPU)."""
    if device.type == "cuda":
        return cfgs.card_of(torch.cuda.get_device_properties(device).name)
    return ""


def _tma_rows(t: torch.Tensor) -> bool:
    """``t`` (2-D) can be a TMA descriptor: unit last stride, rows of at least 16 bytes,
    16-byte aligned base and row stride."""
    elt = t.element_size()
    return (t.stride(1) == 1 and t.shape[1] * elt >= 16 and t.data_ptr() % 16 == 0
            and (t.shape[0] == 1 or ((t.stride(0) * elt) % 16 == 0 and t.stride(0) >= t.shape[1])))


def _tma_stores(t: torch.Tensor) -> bool:
    """``t`` can be stored through by TMA: ``_tma_rows``, and rows of a 16-byte multiple (TMA
    stores write whole 16-byte chunks of a row: a view narrower than its row stride, N = 75 of
    f16, would be overwritten past N; descriptors.store_rule_error refuses it)."""
    return _tma_rows(t) and t.shape[1] * t.element_size() % 16 == 0


def _problem(a, b, out, residual: bool = False, glu: bool = False, promote: bool = False) -> cfgs.Problem:
    M, K = a.shape
    N = b.shape[1]
    a_kmajor = not (a.stride(0) == 1 and a.stride(1) != 1 and M > 1)     # M-major only when clearly so
    b_kmajor = (b.stride(0) == 1 and b.stride(1) != 1) or N == 1
    tma_a = _tma_rows(a) if a_kmajor else _tma_rows(a.t())
    tma_b = _tma_rows(b.t()) if b_kmajor else _tma_rows(b)
    return cfgs.Problem(M, N, K, elt=a.element_size(), out_elt=out.element_size(), a_kmajor=a_kmajor,
                        b_kmajor=b_kmajor, tma_a=tma_a, tma_b=tma_b, tma_c=_tma_stores(out),
                        fp8=a.dtype in FP8_DTYPES, sms=_num_sms(a.device), card=_card(a.device),
                        residual=residual, promote=promote and a.dtype in FP8_DTYPES, glu=glu)


# -- launching one configuration -------------------------------------------------------------------

_COMPILE_ONLY = CompileOnly()          # compile_config: launches compile for sm_90a instead
_launch = _COMPILE_ONLY.launch

def _stage(x: torch.Tensor) -> torch.Tensor:
    """A copy of the 2-D ``x`` (rows along dim 0) whose rows start 16 bytes apart in a
    16-byte-aligned buffer: ``x`` as a TMA descriptor can read it.  The buffer is padded to
    a 16-byte row and viewed back to ``x``'s shape (TMA zero-fills past the shape, so the
    padding is never read)."""
    rows, cols = x.shape
    per_16 = 16 // x.element_size()
    buf = torch.empty((rows, -(-cols // per_16) * per_16), device=x.device, dtype=x.dtype)
    view = buf[:, :cols]
    view.copy_(x)
    return view


def _descriptor(descs: dict | None, role: str, t: torch.Tensor, box: list,
                swizzle: int | None = 128) -> TensorDescriptor:
    """The TMA descriptor of ``t`` for ``role`` ("a", "b", "c", "bt", "ct", "bt2"): built (and checked)
    once per plan, then pointed at this call's tensor.  A plan's key holds the shape, strides,
    dtype, device and 16-byte alignment of every tensor, so the geometry the descriptor checked
    is this tensor's too; its encoded map is reused while the address stays the same.
    ``swizzle=None``: the box's own (a narrow tile tail's 32-byte rows swizzle 32 bytes)."""
    if descs is None:
        return TensorDescriptor.from_tensor(t, box, swizzle=swizzle)
    d = descs.get(role)
    if d is None:
        d = descs[role] = TensorDescriptor.from_tensor(t, box, swizzle=swizzle)
    else:
        d.__dict__["base"] = t        # same geometry (the plan's key): no re-check
    return d


def _release(descs: dict | None) -> None:
    """After the launch: the plan's descriptors forget their tensors (a plan must not keep
    a caller's activations alive)."""
    if descs:
        for d in descs.values():
            d.__dict__["base"] = None


def _launch_ws(c: cfgs.GemmConfig, p: cfgs.Problem, a, b, out, epi: _Epilogue, descs: dict | None = None) -> None:
    trans = cfgs.stores_transposed(c, p)          # a swapped tile's C^T stored as out's rows by TMA
    out_rows = out
    if c.swap:          # C^T [N, M] = B^T [N, K] @ A^T [K, M]: the kernel's A is b^T, its B a^T, its C out^T
        a, b, out, p = b.t(), a.t(), out.t(), cfgs.swapped(p)     # (C^T's rows are contiguous)
    half_m = c.sub_m                              # each consumer's rows (one A box a consumer)
    box_cols = 128 // p.elt                       # one 128-byte swizzle span of operand elements
    if not p.tma_a:                               # staging: aligned copies TMA can read
        a = _stage(a) if p.a_kmajor else _stage(a.t()).t()
    if not p.tma_b:
        b = _stage(b.t()).t() if p.b_kmajor else _stage(b)
    if p.a_kmajor:
        a_desc = _descriptor(descs, "a", a, [half_m, c.bk])
    else:
        a_desc = _descriptor(descs, "a", a.t(), [c.bk, half_m])
    bn, tail, tail2 = cfgs.tail_parts(c.bn)       # a tile of bn + tail (+ tail2) columns (tails: 0, or their own B box)
    # N-major B and the C tile in boxes of one 128-byte swizzle span, or of the whole (narrower) tile
    b_box_n = min(box_cols, bn)
    c_box_n = min(128 // p.out_elt, bn // c.subtile)
    if p.b_kmajor:
        b_desc = _descriptor(descs, "b", b.t(), [bn if c.share_a else bn // c.cluster_m, c.bk])
    else:
        b_desc = _descriptor(descs, "b", b, [c.bk, b_box_n], swizzle=128 if b_box_n == box_cols else None)
    # the output: a TMA descriptor, or the tensor itself (stored through pointers)
    c_arg = _descriptor(descs, "c", out, [half_m, c_box_n], swizzle=128 if c_box_n * p.out_elt == 128 else None) \
        if p.c_tma else out
    bt_desc, ct_desc, bt2_desc = b_desc, c_arg, b_desc      # (unused without a tail)
    if tail:
        bt_desc = _descriptor(descs, "bt", b.t(), [tail, c.bk]) if p.b_kmajor else \
            _descriptor(descs, "bt", b, [c.bk, tail], swizzle=None)
        if p.c_tma:
            ct_desc = _descriptor(descs, "ct", out, [half_m, tail], swizzle=None)
    if tail2:                                     # (K-major B: supports() asks for it)
        bt2_desc = _descriptor(descs, "bt2", b.t(), [tail2, c.bk])
    if trans:           # boxes of out's rows: 16 of them (a chunk of C^T's columns) or 8 (the 8-column tail)
        c_box_n = min(128 // p.out_elt, half_m // 2 if p.glu else half_m)     # (GLU pairs: half the columns)
        swz = 128 if c_box_n * p.out_elt == 128 else None
        c_arg = _descriptor(descs, "c", out_rows, [16, c_box_n], swizzle=swz)
        if tail2:
            ct_desc = _descriptor(descs, "ct", out_rows, [8, c_box_n], swizzle=swz)
    if c.share_a:                                 # pairs side by side
        tiles = -(-p.M // c.bm) * -(-p.N // (c.bn * c.cluster_m))
    else:
        tiles = -(-p.M // (c.bm * c.cluster_m)) * -(-p.N // c.bn)
    clusters = min(p.sms // c.cluster_m, tiles) if c.persistent else tiles
    ws = sk_flags = None
    if c.stream_k:                                # every SM takes a share of the k-steps
        clusters = min(p.sms, tiles * -(-p.K // c.bk))
        ws, sk_flags = _stream_k_buffers(a.device, clusters, c.bm * c.bn, c.consumers)
    progs = clusters * c.cluster_m
    (s0, s1, bias, res, r0, r1), flags = epi.kernel_args(swap=c.swap)
    _launch(gemm_ws_kernel, (progs,), a_desc, b_desc, c_arg, bt_desc, ct_desc, bt2_desc, p.M, p.N, p.K, progs, out.stride(0), out.stride(1),
            s0, s1, bias, res, r0, r1, ws, sk_flags, STREAM_K=c.stream_k,
            BM=c.bm, BN=bn, BN_TAIL=tail, BN_TAIL2=tail2, SHARE_A=c.share_a, BK=c.bk, GROUP_M=c.group_m if c.persistent else 8,
            NUM_STAGES=c.stages, DTYPE=TL_DTYPES[a.dtype], OUT_DTYPE=TL_DTYPES[out.dtype],
            A_KMAJOR=p.a_kmajor, B_KMAJOR=p.b_kmajor, B_BOX_N=b_box_n, C_BOX_N=c_box_n,
            EPILOGUE_SUBTILE=c.subtile, CLUSTER_M=c.cluster_m, C_TMA=p.c_tma, NUM_CONSUMERS=c.consumers,
            CONSUMER_REGS=cfgs.consumer_registers(c.consumers), PROMOTE=p.promote, KSPLIT=c.ksplit, num_warps=4,
            ctas_per_cga=(c.cluster_m, 1, 1) if c.cluster_m > 1 else None, GLU_AXIS=0 if c.swap else 1,
            C_TRANS=trans, **flags,
            **({"B_DTYPE": TL_DTYPES[b.dtype]} if b.dtype != a.dtype else {}))     # mixed fp8 (e4m3 x e5m2)


def align_fact(value: int, needed: bool = True) -> int:
    """The divisibility fact (a power of two, 1 = none) a pointer kernel (``gemm_dot_kernel``,
    ``gemv_kernel``, ``splitk_reduce_kernel``, ``grouped_gemm_kernel``) takes for ``value`` in
    its ``ALIGNS``: given only where ``needed`` and the launch does not know it already
    (a value of 1 is the constant 1, one divisible by 16 is specialized so), at most 8."""
    if not needed or value == 1 or value % 16 == 0:
        return 1
    return min(abs(value) & -abs(value), 8)


def dot_aligns(M: int, N: int, K: int, strides: tuple, split_k: int) -> tuple:
    """``ALIGNS`` of ``gemm_dot_kernel`` (kernels/gemm_dot.py) for its ``strides``
    ``(am, ak, bk, bn, cm, cn)``: the divisibility of each stride, and of M, N, K where a
    vector runs along them (a unit stride along M or N: its wrap and mask; along K: the
    mask; N also for split-K's partials, rows of N floats).  M and N change per call (token
    counts): where no vector runs along them, no fact, so no recompile per value."""
    am, ak, bk, bn, cm, cn = strides
    return (*(align_fact(s, True) for s in strides), align_fact(M, am == 1 or cm == 1),
            align_fact(N, bn == 1 or cn == 1 or split_k > 1), align_fact(K, ak == 1 or bk == 1))


def _launch_dot(c: cfgs.GemmConfig, p: cfgs.Problem, a, b, out, epi: _Epilogue) -> None:
    if c.swap:          # C^T [N, M] = B^T [N, K] @ A^T [K, M]: the strides exchanged
        M, N = p.N, p.M
        x, sxm, sxk = b, b.stride(1), b.stride(0)
        y, syk, syn = a, a.stride(1), a.stride(0)
        scm, scn = out.stride(1), out.stride(0)
    else:
        M, N = p.M, p.N
        x, sxm, sxk = a, a.stride(0), a.stride(1)
        y, syk, syn = b, b.stride(0), b.stride(1)
        scm, scn = out.stride(0), out.stride(1)
    (s0, s1, bias, res, r0, r1), flags = epi.kernel_args(swap=c.swap)
    tiles = -(-M // c.bm) * -(-N // c.bn)
    meta = {"BLOCK_M": c.bm, "BLOCK_N": c.bn, "BLOCK_K": c.bk, "GROUP_M": c.group_m, "SPLIT_K": c.split_k,
            "FIX_M": c.bm, "GLU_AXIS": 0 if c.swap else 1, "num_warps": c.warps, "num_stages": c.stages,
            "PROMOTE": p.promote,
            "ALIGNS": dot_aligns(M, N, p.K, (sxm, sxk, syk, syn, scm, scn), c.split_k)}
    if c.split_k == 1:
        _launch(gemm_dot_kernel, (tiles,), x, y, out, None, None, M, N, p.K, sxm, sxk, syk, syn, scm, scn, s0, s1, bias,
                res, r0, r1, FIXUP=False, **meta, **flags)
        return
    if c.cluster_split:         # the splits of a tile: one cluster, summed in rank 0's shared memory
        _launch(gemm_dot_kernel, (tiles, c.split_k), x, y, out, None, None, M, N, p.K, sxm, sxk, syk, syn, scm, scn,
                s0, s1, bias, res, r0, r1, FIXUP=False, CLUSTER_SPLIT=True, ctas_per_cga=(1, c.split_k, 1), **meta,
                **flags)
        return
    ws = torch.empty((c.split_k, M, N), device=a.device, dtype=torch.float32)
    # the last split of each tile sums (FIX_M rows at a time: 32 float32 per thread), unless
    # TLXC_OPS_SPLITK_REDUCE=1 asks for the separate reduction kernel
    meta["FIX_M"] = min(c.bm, 32 * 32 * c.warps // c.bn)
    if os.environ.get("TLXC_OPS_SPLITK_REDUCE", "") in ("", "0"):
        _launch(gemm_dot_kernel, (tiles, c.split_k), x, y, out, ws, _split_counters(a.device, tiles), M, N, p.K,
                sxm, sxk, syk, syn, scm, scn, s0, s1, bias, res, r0, r1, FIXUP=True, **meta, **flags)
        return
    no_epilogue = {"SCALE0": 0, "SCALE1": 0, "BIAS_DIM": -1, "ACTIVATION": 0, "HAS_RESIDUAL": False}
    _launch(gemm_dot_kernel, (tiles, c.split_k), x, y, out, ws, None, M, N, p.K, sxm, sxk, syk, syn, scm, scn, None,
            None, None, None, 0, 0, FIXUP=False, **meta, **no_epilogue)
    rbm, rbn = REDUCE_BLOCK
    grid = (-(-M // rbm) * -(-N // rbn),)
    aligns = meta["ALIGNS"]             # (stride_cm, stride_cn, N): C's rows and the partials' rows of N floats
    _launch(splitk_reduce_kernel, grid, ws, out, M, N, scm, scn, s0, s1, bias, res, r0, r1, BLOCK_M=rbm, BLOCK_N=rbn,
            SPLIT_K=c.split_k, GLU_AXIS=meta["GLU_AXIS"], num_warps=4, ALIGNS=(aligns[4], aligns[5], aligns[7]),
            **flags)


def _launch_gemv(c: cfgs.GemmConfig, p: cfgs.Problem, a, b, out, epi: _Epilogue) -> None:
    (s0, s1, bias, res, r0, r1), flags = epi.kernel_args(swap=False)
    _launch(gemv_kernel, (-(-p.N // c.bn),), a, b, out, p.N, p.K, a.stride(1), b.stride(0), b.stride(1),
            out.stride(0), out.stride(1), s0, s1, bias, res, r0, r1, BLOCK_N=c.bn, BLOCK_K=c.bk,
            STAGES=c.stages, UNROLL=c.unroll, num_warps=c.warps,
            ALIGNS=(align_fact(b.stride(1), True), align_fact(p.K, b.stride(0) == 1)), **flags)


_LAUNCHERS = {"ws": _launch_ws, "dot": _launch_dot, "gemv": _launch_gemv}


# Split-K arrival counters, one int32 per output tile, zero between launches (the last split
# of a tile resets its own), one buffer per (device, stream): launches on one stream run in
# order, so they can share it; another stream gets its own.
_COUNTERS: dict[tuple, torch.Tensor] = {}


def _stream_k_buffers(device: torch.device, progs: int, tile_elems: int, consumers: int) -> tuple:
    """Stream-K's float32 partial slot per program and its consumers' flags (zero between
    launches: the owner that reads a partial lowers its flag), per (device, stream) as the
    split-K counters."""
    stream = torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0
    key = (device, stream)
    bufs = _STREAM_K.get(key)
    if bufs is None or bufs[0].numel() < progs * tile_elems or bufs[1].numel() < progs * consumers:
        bufs = _STREAM_K[key] = (torch.empty(progs * tile_elems, device=device, dtype=torch.float32),
                                 torch.zeros(progs * consumers, device=device, dtype=torch.int32))
    return bufs


_STREAM_K: dict[tuple, tuple] = {}


def _split_counters(device: torch.device, tiles: int) -> torch.Tensor:
    stream = torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0
    key = (device, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < tiles:
        buf = _COUNTERS[key] = torch.zeros(max(tiles, 4096), device=device, dtype=torch.int32)
    return buf


def run_config(c: cfgs.GemmConfig, p: cfgs.Problem, a, b, out, epi: _Epilogue, descs: dict | None = None) -> None:
    why = cfgs.supports(c, p)
    if why is not None:
        raise ValueError(f"tlxc.ops.matmul: configuration {c.name!r} cannot run {p.M}x{p.N}x{p.K}: {why}")
    if descs is None or c.kernel != "ws":
        _LAUNCHERS[c.kernel](c, p, a, b, out, epi)
        return
    with _PLAN_LOCK:        # a plan's descriptors hold one call's tensors from rebase to launch
        try:
            _launch_ws(c, p, a, b, out, epi, descs)
        finally:
            _release(descs)


# -- plans: what a call derives from its arguments' geometry, kept per geometry ----------------------

class _Plan:
    """The problem, the configuration and the TMA descriptors of one call geometry."""
    __slots__ = ("c", "descs", "p")

    def __init__(self, p: cfgs.Problem, c: cfgs.GemmConfig):
        self.p, self.c, self.descs = p, c, {}


_PLANS: dict[tuple, _Plan] = {}
_PLANS_MAX = 1024
_PLAN_LOCK = threading.RLock()


def _geometry(t: torch.Tensor | None) -> tuple | None:
    """What a plan depends on in a tensor: shape, strides, dtype and 16-byte alignment."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.data_ptr() % 16)


def _plan_key(config, a, b, out, epi: _Epilogue, promote: bool = False) -> tuple:
    dev = a.get_device()
    return (config, dev, CPU_SMS if dev < 0 else 0, _geometry(a), _geometry(b), _geometry(out), epi.flags(), promote)


def compile_config(config: str, a, b, **kwargs) -> list:
    """Compile (for sm_90a, without launching) the kernels ``matmul(a, b, config=config,
    **kwargs)`` would launch; returns their compiled-kernel handles (``.n_regs``,
    ``.n_spills``, ``.metadata.shared``, ``.asm``).  CPU tensors."""
    return _COMPILE_ONLY.collect(matmul, a, b, config=config, **kwargs)


# -- autotuning --------------------------------------------------------------------------------------

_TUNED: dict[str, str] = {}
_TUNED_LOCK = threading.Lock()


def _tuning_file():
    return cache_dir() / "ops" / "matmul.json"


def _tuning_key(p: cfgs.Problem, a, out, epi) -> str:
    return (f"{torch.cuda.get_device_name(a.device) if a.device.type == 'cuda' else 'cpu'}|{p.M}x{p.N}x{p.K}|"
            f"{a.dtype}|{out.dtype}|{int(p.a_kmajor)}{int(p.b_kmajor)}|{int(p.tma_a)}{int(p.tma_b)}{int(p.tma_c)}|"
            f"{epi.flags()}{'|promote' if p.promote else ''}")


def _load_tuned() -> dict:
    if cache_disabled():
        return {}
    try:
        return json.loads(_tuning_file().read_text())
    except (OSError, ValueError):
        return {}


def _time_config(fn, reps: int = 10) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def autotune_config(p: cfgs.Problem, key: str, run, time_fn=_time_config) -> cfgs.GemmConfig:
    """The fastest valid configuration for ``p`` by ``time_fn(lambda: run(config))`` (a config
    that fails is skipped), remembered under ``key`` in memory and on disk."""
    with _TUNED_LOCK:
        if not _TUNED:
            _TUNED.update(_load_tuned())
        name = _TUNED.get(key)
    if name in cfgs.CONFIGS and cfgs.supports(cfgs.CONFIGS[name], p) is None:
        return cfgs.CONFIGS[name]
    best, best_ms = None, float("inf")
    for c in cfgs.candidates(p):
        try:
            ms = time_fn(lambda c=c: run(c))
        except TlxcError:
            continue
        if ms < best_ms:
            best, best_ms = c, ms
    if best is None:
        raise RuntimeError(f"tlxc.ops.matmul: no configuration ran {p.M}x{p.N}x{p.K}")
    with _TUNED_LOCK:
        _TUNED[key] = best.name
        if not cache_disabled():
            path = _tuning_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            merged = _load_tuned()
            merged[key] = best.name
            write_atomically(path, json.dumps(merged, indent=1, sort_keys=True))
    return best


# -- the entry point ---------------------------------------------------------------------------------

def _check_vector(name: str, t, length: int, device) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tlxc.ops.matmul: '{name}' must be a tensor of {length} elements, got {type(t).__name__}")
    if t.dim() == 2 and 1 in t.shape:
        t = t.reshape(-1)
    if t.dim() != 1 or t.shape[0] != length:
        raise ValueError(f"tlxc.ops.matmul: '{name}' must have {length} elements along one dimension, "
                         f"got shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"tlxc.ops.matmul: '{name}' is on {t.device}, the operands on {device}")
    return t.contiguous()


def _folds_rows(t: torch.Tensor) -> bool:
    """Whether ``t``'s leading dimensions fold into one row dimension (``t.view(-1, t.shape[-1])``)."""
    expected = t.stride(-2)
    for size, stride in zip(reversed(t.shape[:-1]), reversed(t.stride()[:-1])):
        if size != 1 and stride != expected:
            return False
        expected = stride * size if size != 1 else expected
    return True


def _check_scale(name: str, s, length: int, device):
    if s is None:
        return None
    if not isinstance(s, torch.Tensor) or s.dtype != torch.float32:
        raise ValueError(f"tlxc.ops.matmul: '{name}' must be a float32 tensor (one element, or one per "
                         f"{'row' if name == 'scale_a' else 'column'}), got {getattr(s, 'dtype', type(s))}")
    if s.numel() == 1:
        if s.device != device:
            raise ValueError(f"tlxc.ops.matmul: '{name}' is on {s.device}, the operands on {device}")
        return s.reshape(1)
    return _check_vector(name, s, length, device)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
           activation: str | None = None, out_dtype: torch.dtype | None = None,
           residual: torch.Tensor | None = None, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None, config: str | None = None,
           use_fast_accum: bool = True) -> torch.Tensor:
    """``activation(a @ b * scale_a * scale_b + bias) + residual`` in ``out_dtype``.

    ``a``: ``[..., K]``, ``b``: ``[K, N]``, both bfloat16, both float16, or fp8 (e4m3/e5m2;
    mixed allowed) with ``a`` row-major and ``b`` K-major (``w.t()``).  ``bias``: ``[N]``;
    ``activation``: ``None``, ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``, or the GLU
    pairs ``"swiglu"``/``"geglu"`` (b ``[K, 2N]``, gate column 2j, up 2j + 1; the output,
    the residual and ``out`` are ``[..., N]``, bias and scale_b ``[2N]``);
    ``residual``: ``[..., N]`` (any strides); ``scale_a``: float32, one element or ``[M]``
    (row-wise); ``scale_b``: one element or ``[N]``.  ``out_dtype``: bfloat16, float16 or
    float32 (default: the operands' dtype, bfloat16 for fp8).  ``out``: written in place
    (any strides).  ``config``: a name of ``matmul_configs.CONFIGS``, ``"autotune"``, or
    None for the heuristic (``TLXC_OPS_AUTOTUNE=1`` makes None mean ``"autotune"``).
    ``use_fast_accum`` (fp8, as ``torch._scaled_mm``'s): True sums every product in the wgmma
    accumulator, whose fp8 sums keep fewer bits than float32 on Hopper; False adds each
    k-step's partial sum (128 products) to a float32 accumulator, as cuBLAS's default does,
    on configurations whose two accumulators fit (``matmul_configs.supports``).  16-bit
    operands always accumulate in float32 (the flag changes nothing there).
    """
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"tlxc.ops.matmul expects tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.dim() < 2 or b.dim() != 2 or a.shape[-1] != b.shape[0]:
        raise ValueError(f"tlxc.ops.matmul expects [..., K] @ [K, N] (or 1-D operands, as torch.matmul), got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype not in OPERAND_DTYPES or b.dtype not in OPERAND_DTYPES:
        raise ValueError(f"tlxc.ops.matmul: operands must be bfloat16, float16 or fp8 (e4m3/e5m2), "
                         f"got {a.dtype} and {b.dtype}")
    if not isinstance(use_fast_accum, bool):
        raise TypeError(f"tlxc.ops.matmul: use_fast_accum must be a bool, got {use_fast_accum!r}")
    fp8 = a.dtype in FP8_DTYPES
    promote = fp8 and not use_fast_accum
    if (b.dtype in FP8_DTYPES) != fp8 or (not fp8 and a.dtype != b.dtype):
        raise ValueError(f"tlxc.ops.matmul: both operands must have the same 16-bit dtype, or both be fp8; "
                         f"got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"tlxc.ops.matmul: operands on {a.device} and {b.device}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"tlxc.ops.matmul: activation must be one of {sorted(k for k in ACTIVATIONS if k)} or "
                         f"None, got {activation!r}")
    lead = tuple(a.shape[:-1])
    a2 = a.reshape(-1, a.shape[-1]) if a.dim() > 2 else a
    M, K = a2.shape
    N = b.shape[1]
    glu = ACTIVATIONS[activation] >= GLU_FIRST
    if glu and N % 2:
        raise ValueError(f"tlxc.ops.matmul: activation={activation!r} pairs the product's columns (gate 2j, up "
                         f"2j + 1): b needs an even number of columns, got {N}")
    n_out = N // 2 if glu else N                      # the output's columns
    if out_dtype is None:
        out_dtype = out.dtype if out is not None else (torch.bfloat16 if fp8 else a.dtype)
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"tlxc.ops.matmul: out_dtype must be one of {OUT_DTYPES}, got {out_dtype}")
    if out is None:
        out2 = torch.empty((M, n_out), device=a.device, dtype=out_dtype)
        out = out2.view(*lead, n_out)
    else:
        if tuple(out.shape) != lead + (n_out,) or out.dtype != out_dtype or out.device != a.device:
            raise ValueError(f"tlxc.ops.matmul: 'out' must be a {lead + (n_out,)} {out_dtype} tensor on {a.device}, "
                             f"got {tuple(out.shape)} {out.dtype} on {out.device}")
        if out.dim() > 2 and not _folds_rows(out):     # e.g. a transposed batch: computed apart, then copied
            return out.copy_(matmul(a, b, bias=bias, activation=activation, out_dtype=out_dtype, residual=residual,
                                    scale_a=scale_a, scale_b=scale_b, config=config, use_fast_accum=use_fast_accum))
        out2 = out.view(M, n_out) if out.dim() > 2 else out
    if bias is not None:
        bias = _check_vector("bias", bias, N, a.device)
    if residual is not None:
        if tuple(residual.shape) != lead + (n_out,) or residual.device != a.device:
            raise ValueError(f"tlxc.ops.matmul: 'residual' must be a {lead + (n_out,)} tensor on {a.device}, "
                             f"got {tuple(residual.shape)} on {residual.device}")
        residual = residual.reshape(M, n_out)
    scale_a = _check_scale("scale_a", scale_a, M, a.device)
    scale_b = _check_scale("scale_b", scale_b, N, a.device)
    if M == 0 or N == 0:
        return out
    epi = _Epilogue(scale_a, scale_b, bias, activation, residual)
    if config is None and os.environ.get("TLXC_OPS_AUTOTUNE", "") not in ("", "0"):
        config = "autotune"
    compiling = _COMPILE_ONLY.active
    key = None if compiling else _plan_key(config, a2, b, out2, epi, promote)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        run_config(plan.c, plan.p, a2, b, out2, epi, plan.descs)
        return out
    p = _problem(a2, b, out2, residual is not None, glu, promote)
    if config is None:
        c = cfgs.choose_config(p) if K > 0 else cfgs.CONFIGS["dot_64x128x64_s4_w4"]
    elif config == "autotune":
        if a.device.type != "cuda":
            raise ValueError("tlxc.ops.matmul: config='autotune' times configurations on the GPU; "
                             "the operands are on the CPU")
        c = autotune_config(p, _tuning_key(p, a2, out2, epi), lambda c: run_config(c, p, a2, b, out2, epi))
    else:
        if config not in cfgs.CONFIGS:
            raise ValueError(f"tlxc.ops.matmul: unknown config {config!r} (see tlxc.ops.matmul_configs.CONFIGS)")
        c = cfgs.CONFIGS[config]
    if key is None:
        run_config(c, p, a2, b, out2, epi)
        return out
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    plan = _PLANS[key] = _Plan(p, c)
    run_config(c, p, a2, b, out2, epi, plan.descs)
    return out


def chosen_config(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None,
                  use_fast_accum: bool = True) -> cfgs.GemmConfig:
    """The configuration the heuristic picks for ``a @ b`` (for inspection and the bench)."""
    out = torch.empty((a.shape[0], b.shape[1]), device="meta", dtype=out_dtype or
                      (torch.bfloat16 if a.dtype in FP8_DTYPES else a.dtype))
    return cfgs.choose_config(_problem(a, b, out, promote=not use_fast_accum))
