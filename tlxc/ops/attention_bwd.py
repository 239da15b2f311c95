"""The attention backward's host side: checks, layouts, block sizes, launches.

``attention_bwd(do, q, k, v, o, lse, *, causal, sm_scale, cu_seqlens_q=None, cu_seqlens_k=None,
max_seqlen_q=None, max_seqlen_k=None, window=None, softcap=None) -> (dq, dk, dv)`` is what
``tlxc.ops.attention``'s autograd calls with the forward's ``o`` and ``lse`` (float32, natural log,
of the scaled, capped and masked scores).  The kernels are in ``kernels/attention_bwd.py``.

* dense: ``q``, ``o``, ``do`` ``[B, H, Sq, D]``, ``k``, ``v`` ``[B, Hkv, Sk, D]``, ``lse``
  ``[B, H, Sq]``; any strides with a unit stride along D (a BSHD tensor seen as BHSD through
  ``transpose(1, 2)`` is read in place);
* packed variable length (flash-attn's varlen convention): ``q``, ``o``, ``do``
  ``[total_q, H, D]``, ``k``, ``v`` ``[total_k, Hkv, D]``, ``cu_seqlens_q`` / ``cu_seqlens_k``
  int32 ``[B + 1]`` on the device, ``lse`` ``[H, total_q]``; ``max_seqlen_q`` / ``_k`` the
  longest sequences (computed from ``cu_seqlens``, with a host sync, when left None);
* GQA / MQA: ``H % Hkv == 0``, query head ``h`` reads kv head ``h // (H // Hkv)``; dk and dv
  are summed over the query heads of a group;
* fp16 / bf16, head dims up to 256 (a dim that is not a power of two, 96 or 192, runs in the
  next power-of-two tile with the extra columns masked); outputs in the input dtype.
* ``causal``: torch's ``is_causal`` (top-left aligned: query ``i`` sees keys ``j <= i``), per
  sequence in the packed layout.
* ``window=(left, right)`` (flash-attn's ``window_size``; -1: that side unbounded): query ``i``
  sees keys ``i - left <= j <= i + right`` (and, causal, ``j <= i``), per sequence; a row that
  sees no key has ``lse = -inf`` and no gradient.  ``softcap=c``: the scores were
  ``c * tanh(sm_scale * q.k / c)`` (Gemma 2).  Either one switches the kernels' ``WINDOW`` /
  ``SOFTCAP`` flag on; without them the kernels are those of plain attention.
"""
from __future__ import annotations

import functools
import heapq
import math
import os

import torch

from .. import language as tl
from ..descriptors import TensorDescriptor
from .attention import check_softcap, check_window, stride_align
from .compile_only import CompileOnly
from .kernels.attention_bwd import bwd_dkdv_kernel, bwd_dq_kernel, bwd_preprocess_kernel
from .kernels.attention_bwd_ws import D_BOX, DQ_SPAN, bwd_ws_kernel

DTYPES = (torch.float16, torch.bfloat16)
LOG2E = 1.4426950408889634

# padded head dim -> ((dkdv BLOCK_N, BLOCK_M, warps, stages), (dq BLOCK_M, BLOCK_N, warps, stages))
BLOCKS = {
    64: ((128, 64, 8, 3), (128, 64, 8, 3)),
    128: ((128, 64, 8, 3), (128, 64, 8, 3)),
    256: ((64, 64, 8, 2), (128, 32, 8, 2)),
}
# padded head dim -> programs of the dQ kernel per SM (sm_90a: 124 registers x 256 threads and 80 KB of
# shared memory at 64; one elsewhere, and one for the dK/dV kernel): sizes its causal sections
DQ_PER_SM = {64: 2}
PRE_BLOCK = 64                     # rows per program of the preprocess kernel
WS_BLOCK_M = 64                    # query rows per tile of the warp-specialized kernel
WS_BLOCK_N = 128                   # its keys per program (64 per consumer warp group)
# TLXC_ATTN_BWD=auto: (head dim, GQA) -> the ws kernel from this many keys up.  H200, session 20
# (bench/attention_bwd_bench.py --tokens 16384, kernel time, the ws kernel's speed over the tl.dot
# kernels'): D = 64 1.10-1.37x at S = 512 / 1024, 1.00-1.15x at S = 256; D = 128 1.09-1.21x at S = 512,
# at S = 256 1.07-1.11x with GQA-4 but 0.69-0.78x MHA (an MHA item walks 4 query tiles: its K / V
# load and dK / dV stores are not paid back).  Below 256 keys: not measured, the tl.dot kernels
WS_MIN_KEYS = {(64, False): 256, (64, True): 256, (128, False): 512, (128, True): 256}
# packed (varlen) inputs, by head dim: the thresholds before session 20 (not measured on packed batches,
# whose short sequences make short items: kept until a varlen backward bench says otherwise)
WS_MIN_KEYS_PACKED = {64: 2048, 128: 1024}
# head dim -> the ws kernel loads a tile's lse2 / delta one tile ahead (H200, session 12: 3.6% faster at
# D = 128, even at D = 64)
WS_PREFETCH_STATS = {64: False, 128: True}
# head dim -> a tile's dQ is added into dq_acc during the next tile's S^T (D = 128 only: at 64 one
# consumer of two adds each tile's dQ)
WS_DEFER_DQ = {64: False, 128: True}
# (head dim, causal) -> the consumer that does not compute a tile's dQ signals its dS^T half without waiting,
# so the two consumers can drift apart by up to a tile instead of meeting every tile.  D = 128 (session 36):
# consumer ``t % 2`` then computes both column halves of tile t's dQ (two 64-column products, added at once:
# no ``WS_DEFER_DQ`` there) where each consumer computed its half in step.  H100, session 36 (two runs, S 512
# to 8192): D = 128 without a mask 1.010-1.032x from S = 1024 (0.997 / 1.009 at S = 512), under a causal mask
# 0.987-1.026x (it spills 24 registers there, 9 without a mask): on without a mask; D = 64 (on since session
# 12, first timed in session 36) 0.997-1.005x against in step
WS_DRIFT = {(64, False): True, (64, True): True, (128, False): True, (128, True): False}
WS_STAGES = {64: 4, 128: 2}        # its Q / dO ring per head dim (shared memory: 208 / 224 KB)
# head dim -> the producer loads a tile's lse2 / delta rows by TMA with its Q / dO (into the ring's slots,
# 256 bytes each), and the consumers read them from shared memory in the products' layout: no global
# load per tile, no conversion through shared memory between two warp-group barriers (as each use of a
# loaded row needs); the statistics' rows are padded to 16 bytes for the descriptor (session 14; A/B).
# A TMA box must start at a 16-byte multiple of its innermost dimension (else an illegal instruction on
# the H200, session 15; the interpreter refuses it): packed inputs get their statistics with each
# sequence's rows moved to a 16-byte multiple (``_stat_first``; FA3 pads its offsets likewise)
# (head dim, causal) -> on.  H200 2026-12-04 (16 cases, S 512 / 2048): 1.028x the speed geomean; D = 64 0.97-1.07x,
# D = 128 causal 1.05-1.09x, D = 128 non-causal 0.93-1.03x (slower at S = 2048): off there until session 36,
# whose H100 run with dQ staged in rows (WS_DQ_ROWS, fewer shared-store wavefronts) measured D = 128 non-causal
# 1.032-1.043x at S 1024 / 2048 / 4096 (MHA and GQA-4): on everywhere (the H200's run is pending), except
# under ``WS_OPTIONS_IN_STEP``
WS_STATS_SMEM = {(64, False): True, (64, True): True, (128, False): True, (128, True): True}
# head dim -> without a mask but under a window or softcapping, the ws kernel keeps the form it had before
# session 36 (statistics converted, consumers in step, dQ deferred): session 36's choices at D = 128 without a
# mask (WS_STATS_SMEM, WS_DRIFT) spill 4-32 registers at sm_90a there (0 in that form), and were not timed
WS_OPTIONS_IN_STEP = {64: False, 128: True}
# head dim -> the dQ staging tiles hold a row's 64 floats in one 256-byte run (``DQ_ROWS``: a 3-D TMA box
# ``[64, 2, 32]`` over ``dq_acc`` seen as ``[rows, row_stride / 32, 32]``) instead of two 32-column blocks:
# ncu (H100, session 36, D = 128 without a mask) counted 4.3 wavefronts per shared store request of the ws
# kernel; the column blocks' 8-byte stores take 4 where 2 would do (a half-warp's four rows fall on four of
# the 128-byte swizzle's eight chunk positions).  Needs ``row_stride % 32 == 0`` (else the blocks).
# H100 (session 36, 16 cases, S 1024 / 4096): 1.027x the speed geomean, D = 64 1.03-1.05x, D = 128 1.01-1.02x,
# every case faster; ncu's store-conflict report gone.  The H200's run is pending (.ci/device_pending)
WS_DQ_ROWS = {64: True, 128: True}
WS_STATS_SMEM_PACKED = False       # packed inputs too: not measured (D = 128 causal spills 14 words there)
STAT_PAD = 4                       # the statistics' row length is a multiple of this (WS_STATS_SMEM)
# causal -> persistent: on dense inputs the ws kernel runs one program per SM, each walking the
# (key block, batch, kv head) items of its row of a host-built table (``_ws_schedule``), so an
# item's K / V load overlaps the previous item's dK / dV stores and no program is launched per item;
# False: one program per item, ordered by the hardware's block scheduler.  H200, session 13 run 2:
# non-causal (equal items, a static round robin) 4-10% slower than one program per item (the
# hardware gives the next item to whichever SM is free; a fixed table cannot absorb slower SMs);
# causal (persistent with sections) 1.05-1.16x session 12's order, above the sections' model alone
WS_PERSISTENT = {False: False, True: True}
# causal -> dynamic (dense inputs; session 14, an A/B, off by default): one program per SM (as the
# persistent table) but each draws its next item from a device counter when it starts one (FA3's
# scheduler), in ``section_tile``'s order: the item-boundary overlap without the table's static
# assignment, which slower SMs cannot rebalance (the table lost 4-10% on non-causal inputs)
WS_DYNAMIC = {False: False, True: False}
# causal -> items per program of the persistent table: 0, one program per SM, the table's rows
# list-scheduled; k > 0, ceil(items / k) programs of about k items each, which the block scheduler hands
# to SMs as they free up (within a program an item's K / V load still overlaps the previous item's
# dK / dV stores, and the hardware still balances the programs: what the one-per-SM table lost without
# a mask).  H200, session 21 (bench column ``tlxc_ws_p2``, k = 2, no mask): 0.955x the default's speed
# over 12 cases, as the one-per-SM table (0.952x): off
WS_PROGRAM_ITEMS = {False: 0, True: 0}
WS_ITEM_COST = 4                   # the schedule's cost of an item beyond its tiles, in tiles (K/V, fill, stores)
TL_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
CPU_SMS = 132                      # on the CPU (interpreter, compile_kernels) the section size models an H200
SECTIONS = True                    # causal programs in sections, longest first (False: the plain order; A/B)

_COMPILE_ONLY = CompileOnly()       # compile_kernels: launches compile for sm_90a instead
_launch = _COMPILE_ONLY.launch


def compile_kernels(*args, **kwargs) -> list:
    """Compile (for sm_90a, no launch) the three kernels ``attention_bwd(*args, **kwargs)``
    would launch; CPU tensors.  Returns the compiled-kernel handles (``.n_regs``,
    ``.n_spills``, ``.metadata.shared``, ``.asm``)."""
    return _COMPILE_ONLY.collect(attention_bwd, *args, **kwargs)


def _kernel_choice(head_dim: int, max_keys: int, group: int, varlen: bool) -> str:
    """``dot`` or ``ws``, from ``TLXC_ATTN_BWD``: ``dot`` (three tl.dot kernels, deterministic),
    ``ws`` (the warp-specialized kernel where it applies: head dim 64 or 128, TMA-describable
    rows; dQ by float32 TMA reduce-adds, not bit-reproducible) or ``auto`` (the default): ``ws``
    from ``WS_MIN_KEYS[head_dim, group > 1]`` keys per sequence up (packed inputs:
    ``WS_MIN_KEYS_PACKED[head_dim]`` keys in the longest), unless torch's deterministic mode is on."""
    choice = os.environ.get("TLXC_ATTN_BWD", "auto") or "auto"
    if choice not in ("auto", "dot", "ws"):
        _fail(f"TLXC_ATTN_BWD must be 'auto', 'dot' or 'ws', got {choice!r}")
    if choice == "auto":
        least = WS_MIN_KEYS_PACKED.get(head_dim) if varlen else WS_MIN_KEYS.get((head_dim, group > 1))
        ws = least is not None and max_keys >= least and not torch.are_deterministic_algorithms_enabled()
        choice = "ws" if ws else "dot"
    return choice


def _num_sms(device: torch.device) -> int:
    return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device()) \
        if device.type == "cuda" else CPU_SMS


@functools.cache
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _heads_per_section(n_blocks: int, causal: bool, varlen: bool, device: torch.device, per_sm: int = 1) -> int:
    """The programs' order (``kernels/attention_bwd.py: section_tile``): under a dense causal
    mask the blocks of a head walk different lengths (block 0 the longest), so the (batch, head)
    pairs go in sections of about as many as fill the SMs with one program each (a power of two,
    at least 1; ``per_sm`` programs of the kernel fit on an SM), block-major inside a section: the
    long walks start first and the short ones fill the tail, while the pairs in flight at one
    time are as many as in the plain order (their Q, dO and dQ rows stay in L2).  Otherwise 1,
    the plain order: equal walks (non-causal) or per-sequence lengths (packed)."""
    if not causal or varlen or not SECTIONS:
        return 1
    heads, programs = 1, _num_sms(device) * per_sm
    while heads * 2 * n_blocks <= programs:
        heads *= 2
    return heads


def _ws_item_tiles(block: int, n_q_tiles: int, causal: bool, bounds: tuple[int, int] | None) -> int:
    """The 64-query tiles the ws kernel's item of key block ``block`` walks per query head (as its
    ``_work``): under a window (``bounds``, the kernels' (left, right)) the rows that see the block."""
    if bounds is None:
        return max(n_q_tiles - (2 * block if causal else 0), 0)
    left, right = bounds
    start_n = block * WS_BLOCK_N
    first = max(start_n // WS_BLOCK_M if causal else 0, max(start_n - right, 0) // WS_BLOCK_M)
    end = min(n_q_tiles, (start_n + WS_BLOCK_N - 1 + left) // WS_BLOCK_M + 1)
    return max(end - first, 0)


@functools.lru_cache(maxsize=32)
def _ws_schedule(n_pairs: int, n_blocks: int, n_q_tiles: int, group: int, causal: bool, programs: int,
                 heads_per_section: int, device: str, bounds: tuple[int, int] | None = None) -> torch.Tensor:
    """The persistent ws kernel's table, int32 ``[P, 1 + n]``: row ``p`` = (count, items), an item
    ``pair * n_blocks + block`` ((batch, kv head) pair, key block of 128).  The items in
    ``section_tile``'s order (causal: the longest walks first within sections of
    ``heads_per_section`` pairs; otherwise a pair's blocks one after another), each given to the
    program the model frees first (list scheduling; cost: the item's 64-query tiles, ``group *
    (n_q_tiles - 2 * block)`` causal, under a window's (left, right) ``bounds`` those that reach the
    block (``_ws_item_tiles``), plus ``WS_ITEM_COST``), as programs that fetched the next item when
    done would take them; ``P = min(programs, items)``."""
    items = []
    for s0 in range(0, n_pairs, heads_per_section):
        here = min(heads_per_section, n_pairs - s0)
        items += [(s0 + i) * n_blocks + blk for blk in range(n_blocks) for i in range(here)]
    n_programs = max(1, min(programs, len(items)))
    free = [(0, p) for p in range(n_programs)]
    rows = [[] for _ in range(n_programs)]
    for item in items:
        tiles = group * _ws_item_tiles(item % n_blocks, n_q_tiles, causal, bounds)
        load, p = heapq.heappop(free)
        rows[p].append(item)
        heapq.heappush(free, (load + tiles + WS_ITEM_COST, p))
    width = 1 + max(len(r) for r in rows)
    table = torch.zeros((n_programs, width), dtype=torch.int32)
    for p, r in enumerate(rows):
        table[p, 0] = len(r)
        table[p, 1:1 + len(r)] = torch.tensor(r, dtype=torch.int32)
    return table.to(device)


def _rows_view(t: torch.Tensor, strides, n_batch: int, n_heads: int, n_rows: int, box_rows: int):
    """A 2-D TMA view of ``t``'s rows: (descriptor over ``[R, row stride]`` with a box of
    ``box_rows`` x 64, r_b, r_h, c_h) such that row ``m`` of (batch b, head h) is descriptor row
    ``b * r_b + h * r_h + m`` at column ``h * c_h``; None when the strides do not allow it."""
    sb, sh, sr = strides
    D = t.shape[-1]
    if t.stride(-1) != 1 or sr < D or (sr * t.element_size()) % 16 or t.data_ptr() % 16:
        return None
    if sh % sr == 0:
        r_h, c_h = sh // sr, 0
    elif sh < sr and (n_heads - 1) * sh + D <= sr:
        r_h, c_h = 0, sh
    else:
        return None
    if sb % sr:
        return None
    r_b = sb // sr
    rows = (n_batch - 1) * r_b + (n_heads - 1) * r_h + n_rows
    desc = TensorDescriptor(t, [rows, sr], [sr, 1], [box_rows, D_BOX], swizzle=128)
    return desc, r_b, r_h, c_h, rows


def _stat_rows(t: torch.Tensor) -> TensorDescriptor:
    """A TMA view of a statistics tensor with padded rows (``[B, H, S]`` or packed ``[H, total]``,
    rows ``t.stride(-2)`` floats apart) as ``[rows, S]``: (batch, head) -> row ``b * H + h``
    (packed: ``h``), a box of one row of ``WS_BLOCK_M`` floats; columns past S read as 0."""
    n = t.shape[-1]
    rows = t.numel() // n
    return TensorDescriptor(t.as_strided((rows, n), (t.stride(-2), 1)), [rows, n], [t.stride(-2), 1], [1, WS_BLOCK_M])


def _stat_first(t: torch.Tensor, cu_q: torch.Tensor) -> torch.Tensor:
    """Packed statistics ``[H, total_q]`` (``WS_STATS_SMEM``) with sequence ``b``'s rows moved to
    column ``(cu_q[b] + (STAT_PAD - 1) * b) // STAT_PAD * STAT_PAD``, a 16-byte multiple (the ws
    kernel's copies start there: ``_produce_item``), zeros between the sequences.  That column is
    at most ``cu_q[b] + 3 b`` and the next one at least ``cu_q[b + 1] + 3 b``: no overlap; the
    rows are ``total_q + 3 B`` rounded up to ``STAT_PAD`` long."""
    H, total = t.shape
    B = cu_q.shape[0] - 1
    width = -(-(total + (STAT_PAD - 1) * B) // STAT_PAD) * STAT_PAD
    rows = torch.arange(total, device=t.device, dtype=torch.int64)
    seq = torch.searchsorted(cu_q[1:].to(torch.int64), rows, right=True)
    first = cu_q[:-1].to(torch.int64)
    shift = (first + (STAT_PAD - 1) * torch.arange(B, device=t.device)) // STAT_PAD * STAT_PAD - first
    out = torch.zeros(H, width, device=t.device, dtype=t.dtype)
    out.index_copy_(1, rows + shift[seq.clamp(max=B - 1)], t)
    return out


def _padded_dim(d: int) -> int:
    return max(16, 1 << (d - 1).bit_length())


def _blocks(head_dim: int):
    return BLOCKS[64 if head_dim <= 64 else head_dim]


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def _fail(msg: str):
    raise ValueError(f"tlxc.ops.attention backward: {msg}")


def _check_cu(name: str, cu, device) -> torch.Tensor:
    if not isinstance(cu, torch.Tensor) or cu.dtype != torch.int32 or cu.dim() != 1 or cu.shape[0] < 1:
        _fail(f"'{name}' must be a 1-D int32 tensor of batch + 1 offsets, got "
              f"{getattr(cu, 'dtype', type(cu).__name__)} of shape {tuple(getattr(cu, 'shape', ()))}")
    if cu.device != device:
        _fail(f"'{name}' is on {cu.device}, q on {device}")
    return cu.contiguous()


def _max_len(cu: torch.Tensor, given, name: str) -> int:
    if given is None:
        return int((cu[1:] - cu[:-1]).max().item()) if cu.shape[0] > 1 else 0
    if not isinstance(given, int) or given < 0:
        _fail(f"'{name}' must be a non-negative int, got {given!r}")
    return given


def _check_window(window, causal: bool) -> tuple[int, int] | None:
    """``window`` as (left, right) with -1 for an unbounded side (the forward's rules,
    ``attention.check_window``), or None when it bounds nothing."""
    left, right = check_window(window, causal)
    return None if left < 0 and right < 0 else (left, right)


def _in_step(D: int, causal: bool, window, softcap) -> bool:
    """``WS_OPTIONS_IN_STEP``: a launch without a mask but with a window or a cap at a head dim that keeps
    the ws kernel's earlier form there."""
    return not causal and (window is not None or softcap is not None) and WS_OPTIONS_IN_STEP.get(D, False)


def _check_softcap(softcap) -> float | None:
    return check_softcap(softcap) or None


def _window_bounds(window: tuple[int, int] | None, Sq: int, Sk: int) -> tuple[int, int] | None:
    """The kernels' (window_left, window_right) of a checked ``window``: an unbounded side (or
    one past every key) becomes ``Sq + Sk``, a bound no row reaches, so that the kernels' int32
    sums cannot overflow; None without a window."""
    if window is None:
        return None
    reach = Sq + Sk
    return tuple(reach if w < 0 else min(w, reach) for w in window)


def _options(bounds: tuple[int, int] | None, softcap: float | None) -> tuple[tuple, dict[str, bool]]:
    """The kernels' runtime arguments (window_left, window_right, softcap; None where an option is
    off, so no parameter is left in the code) and the ``WINDOW`` / ``SOFTCAP`` flags of the options
    that are on (none for plain attention: the kernels' defaults, the kernels without options)."""
    flags = {}
    if bounds is not None:
        flags["WINDOW"] = True
    if softcap is not None:
        flags["SOFTCAP"] = True
    return (*(bounds or (None, None)), softcap), flags


def attention_bwd(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                  lse: torch.Tensor, *, causal: bool, sm_scale: float, cu_seqlens_q: torch.Tensor | None = None,
                  cu_seqlens_k: torch.Tensor | None = None, max_seqlen_q: int | None = None,
                  max_seqlen_k: int | None = None, window: tuple[int, int] | None = None,
                  softcap: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of ``o = softmax(sm_scale * q k^T, capped, masked) v`` given ``do``, the
    forward's ``o`` and its ``lse``.  See the module docstring for layouts and options."""
    for name, t in (("do", do), ("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tlxc.ops.attention backward: '{name}' must be a tensor, got {type(t).__name__}")
    if q.dtype not in DTYPES or any(t.dtype != q.dtype for t in (k, v, o, do)):
        _fail(f"q, k, v, o, do must all be float16 or all bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}, "
              f"{o.dtype}, {do.dtype}")
    if lse.dtype != torch.float32:
        _fail(f"lse must be float32, got {lse.dtype}")
    if any(t.device != q.device for t in (k, v, o, do, lse)):
        _fail("all tensors must be on one device")
    if not isinstance(causal, bool):
        _fail(f"causal must be a bool, got {causal!r}")
    sm_scale = float(sm_scale)
    if not math.isfinite(sm_scale):
        _fail(f"sm_scale must be finite, got {sm_scale}")
    window = _check_window(window, causal)
    softcap = _check_softcap(softcap)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            _fail("cu_seqlens_q and cu_seqlens_k go together (packed layout), got only one")
        if q.dim() != 3 or k.dim() != 3:
            _fail(f"the packed layout takes q [total_q, H, D] and k, v [total_k, Hkv, D], got {tuple(q.shape)} "
                  f"and {tuple(k.shape)}")
        cu_q = _check_cu("cu_seqlens_q", cu_seqlens_q, q.device)
        cu_k = _check_cu("cu_seqlens_k", cu_seqlens_k, q.device)
        if cu_q.shape != cu_k.shape:
            _fail(f"cu_seqlens_q and cu_seqlens_k must have one length, got {cu_q.shape[0]} and {cu_k.shape[0]}")
        B = cu_q.shape[0] - 1
        total_q, H, D = q.shape
        total_k, H_kv, Dk = k.shape
        Sq = _max_len(cu_q, max_seqlen_q, "max_seqlen_q")
        Sk = _max_len(cu_k, max_seqlen_k, "max_seqlen_k")
        lse_shape = (H, total_q)
    else:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            _fail("max_seqlen_q / max_seqlen_k belong to the packed layout (with cu_seqlens)")
        if q.dim() != 4 or k.dim() != 4:
            _fail(f"expected q [B, H, Sq, D] and k, v [B, Hkv, Sk, D], got {tuple(q.shape)} and {tuple(k.shape)}")
        B, H, Sq, D = q.shape
        _, H_kv, Sk, Dk = k.shape
        if k.shape[0] != B:
            _fail(f"q and k have different batch sizes: {tuple(q.shape)} and {tuple(k.shape)}")
        lse_shape = (B, H, Sq)
    if tuple(v.shape) != tuple(k.shape):
        _fail(f"v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if tuple(o.shape) != tuple(q.shape) or tuple(do.shape) != tuple(q.shape):
        _fail(f"o and do must have q's shape {tuple(q.shape)}, got {tuple(o.shape)} and {tuple(do.shape)}")
    if Dk != D:
        _fail(f"q and k must have one head dim, got {D} and {Dk}")
    if not 1 <= D <= 256:
        _fail(f"head dims 1..256 are supported, got {D}")
    if (H_kv < 1 or H % H_kv) and not H == H_kv == 0:       # (no heads at all: empty gradients)
        _fail(f"the query heads ({H}) must be a multiple of the key/value heads ({H_kv})")
    if tuple(lse.shape) != lse_shape:
        _fail(f"lse must have shape {lse_shape}, got {tuple(lse.shape)}")

    q, k, v, o, do, lse = (_unit_last(t) for t in (q, k, v, o, do, lse))
    alloc = torch.zeros_like if varlen else torch.empty_like    # packed: rows outside every sequence get 0
    dq, dk, dv = alloc(q), alloc(k), alloc(v)
    dq, dk, dv = (_unit_last(t) for t in (dq, dk, dv))
    if B == 0 or H == 0 or q.numel() == 0 and k.numel() == 0:
        return dq, dk, dv
    if q.numel() == 0 or Sq == 0:        # no query: nothing flows back to the keys
        dk.zero_()
        dv.zero_()
        return dq, dk, dv

    if varlen:       # [total, H, D] as (batch, head, row) strides: batch 0, the rows start at cu_seqlens[b]
        def strides(t):
            return 0, t.stride(1), t.stride(0)
        cu_q_arg, cu_k_arg = cu_q, cu_k
    else:
        def strides(t):
            return t.stride(0), t.stride(1), t.stride(2)
        cu_q_arg = cu_k_arg = None
    ws_views = None
    bounds = _window_bounds(window, Sq, Sk)
    option_args, option_flags = _options(bounds, softcap)
    if Sk > 0 and _kernel_choice(D, Sk, H // H_kv, varlen) == "ws" and D in (64, 128):
        ws_views = _ws_views(q, k, v, do, B, H, H_kv, total_q if varlen else Sq, total_k if varlen else Sk, varlen,
                             strides)              # None: not TMA-describable, the tl.dot kernels run
    stats_smem = (ws_views is not None and WS_STATS_SMEM.get((D, bool(causal)), False)
                  and (WS_STATS_SMEM_PACKED or not varlen)
                  and not _in_step(D, causal, window, softcap))
    if stats_smem and not varlen:   # rows padded for the ws kernel's TMA descriptors (16-byte strides); delta * sm_scale
        padded = (*lse_shape[:-1], -(-lse_shape[-1] // STAT_PAD) * STAT_PAD)
        delta = torch.empty(padded, device=q.device, dtype=torch.float32)[..., :lse_shape[-1]]
        lse2 = torch.empty(padded, device=q.device, dtype=torch.float32)[..., :lse_shape[-1]]
    else:
        delta = torch.empty(lse_shape, device=q.device, dtype=torch.float32)
        lse2 = torch.empty_like(delta)
    stat_strides = (0, delta.stride(0)) if varlen else (delta.stride(0), delta.stride(1))
    lse_strides = (0, lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1))
    HD = _padded_dim(D)
    (kn, km, kw, ks), (qm, qn, qw, qs) = _blocks(HD)
    align = stride_align(q, k, v, do, o, dq, dk, dv)
    group = H // H_kv

    # preprocess: over every row of every (batch, head); packed: all total_q rows of a head
    pre_rows, pre_bh = (total_q, H) if varlen else (Sq, B * H)
    if pre_rows:
        _launch(bwd_preprocess_kernel, (-(-pre_rows // PRE_BLOCK), pre_bh), o, do, lse, delta, lse2, pre_rows, H,
                *strides(o), *strides(do), *lse_strides, *stat_strides, sm_scale if stats_smem else 1.0, D=D,
                HEAD_DIM=HD, BLOCK=PRE_BLOCK, ALIGN=align, num_warps=4)
    common = (*strides(q), *strides(k), *strides(v), *strides(do), *stat_strides)
    qk_scale = sm_scale * LOG2E
    if stats_smem and varlen:       # each sequence's rows moved to a 16-byte multiple (the copies' start)
        lse2, delta = _stat_first(lse2, cu_q), _stat_first(delta, cu_q)
        stat_strides = (0, delta.stride(0))
    if ws_views is not None:
        return _launch_ws(ws_views, q, dq, dk, dv, lse2, delta, cu_q_arg, cu_k_arg, B, H, H_kv, Sq, Sk, varlen,
                          strides, stat_strides, qk_scale, sm_scale, causal, stats_smem, bounds, softcap)
    if Sk > 0:
        _launch(bwd_dkdv_kernel, (-(-Sk // kn) * B * H_kv,), q, k, v, do, lse2, delta, dk, dv, cu_q_arg, cu_k_arg,
                Sq, Sk, H_kv, *common, *strides(dk), *strides(dv), qk_scale, sm_scale,
                _heads_per_section(-(-Sk // kn), causal, varlen, q.device), *option_args, D=D, HEAD_DIM=HD,
                BLOCK_M=km, BLOCK_N=kn, GROUP=group, CAUSAL=causal, VARLEN=varlen, ALIGN=align, **option_flags,
                num_warps=kw, num_stages=ks)
    else:
        dq.zero_()
        return dq, dk, dv
    _launch(bwd_dq_kernel, (-(-Sq // qm) * B * H,), q, k, v, do, lse2, delta, dq, cu_q_arg, cu_k_arg, Sq, Sk, H,
            *common, *strides(dq), qk_scale, sm_scale,
            _heads_per_section(-(-Sq // qm), causal, varlen, q.device, DQ_PER_SM.get(HD, 1)), *option_args, D=D,
            HEAD_DIM=HD, BLOCK_M=qm, BLOCK_N=qn, GROUP=group, CAUSAL=causal, VARLEN=varlen, ALIGN=align,
            **option_flags, num_warps=qw, num_stages=qs)
    return dq, dk, dv


def _ws_views(q, k, v, do, B, H, H_kv, rows_q, rows_k, varlen, strides):
    """The ws kernel's TMA views of q, do, k, v (``_rows_view``'s), or None when a tensor's rows
    cannot be described by TMA or do / v are laid out unlike q / k (the tl.dot kernels run)."""
    nb = 1 if varlen else B
    views = [_rows_view(t, strides(t), nb, heads, rows, box)
             for t, heads, rows, box in ((q, H, rows_q, WS_BLOCK_M), (do, H, rows_q, WS_BLOCK_M),
                                         (k, H_kv, rows_k, WS_BLOCK_N), (v, H_kv, rows_k, WS_BLOCK_N))]
    if any(view is None for view in views):
        return None
    (_, *q_geom), (_, *do_geom), (_, *k_geom), (_, *v_geom) = views
    if do_geom[:3] != q_geom[:3] or v_geom[:3] != k_geom[:3]:
        return None
    return views


def _launch_ws(views, q, dq, dk, dv, lse2, delta, cu_q, cu_k, B, H, H_kv, Sq, Sk, varlen, strides, stat_strides,
               qk_scale, sm_scale, causal, stats_smem, bounds, softcap):
    """The warp-specialized kernel (kernels/attention_bwd_ws.py) on ``_ws_views``' views;
    ``stats_smem``: the statistics' rows are padded and delta is scaled by ``sm_scale``;
    ``bounds`` (``_window_bounds``) and ``softcap``: None where the option is off."""
    (q_desc, qr_b, qr_h, qc_h, q_rows), (do_desc, *_), (k_desc, kr_b, kr_h, kc_h, _), (v_desc, *_) = views
    D = q.shape[-1]
    row_stride = strides(q)[2]
    dynamic = WS_DYNAMIC[causal] and not varlen
    # (dynamic: the items' counter after the rows, zeroed with them)
    acc = torch.zeros(q_rows * row_stride + 4 * dynamic, device=q.device, dtype=torch.float32)
    dq_acc = acc[:q_rows * row_stride].view(q_rows, row_stride)
    dq_rows = WS_DQ_ROWS.get(D, False) and row_stride % DQ_SPAN == 0
    drift = WS_DRIFT[D, bool(causal)] and not _in_step(D, causal, bounds, softcap)
    if dq_rows:
        dq_desc = TensorDescriptor(dq_acc, [q_rows, row_stride // DQ_SPAN, DQ_SPAN], [row_stride, DQ_SPAN, 1],
                                   [WS_BLOCK_M, D_BOX // DQ_SPAN, DQ_SPAN], swizzle=128)
    else:
        dq_desc = TensorDescriptor(dq_acc, [q_rows, row_stride], [row_stride, 1], [WS_BLOCK_M, D_BOX], swizzle=128)
    n_blocks = -(-Sk // WS_BLOCK_N)
    sections = _heads_per_section(n_blocks, causal, varlen, q.device)
    persistent = WS_PERSISTENT[causal] and not varlen and not dynamic
    if dynamic:
        n_items = n_blocks * B * H_kv
        grid, sched = (min(_num_sms(q.device), n_items),), (acc[-4:].view(torch.int32), n_items)
    elif persistent:
        per_program = WS_PROGRAM_ITEMS[causal]
        programs = -(-n_blocks * B * H_kv // per_program) if per_program else _num_sms(q.device)
        table = _ws_schedule(B * H_kv, n_blocks, -(-Sq // WS_BLOCK_M), H // H_kv, causal, programs,
                             sections, str(q.device), bounds)
        grid, sched = (table.shape[0],), (table, table.stride(0))
    else:
        grid, sched = (n_blocks * B * H_kv,), (None, 0)
    stat_descs = (_stat_rows(lse2), _stat_rows(delta)) if stats_smem else (None, None)
    option_args, option_flags = _options(bounds, softcap)
    _launch(bwd_ws_kernel, grid, q_desc, k_desc, v_desc, do_desc, dq_desc, lse2, delta, dk, dv,
            cu_q, cu_k, Sq, Sk, H_kv, qr_b, qr_h, qc_h, kr_b, kr_h, kc_h, *stat_strides, *strides(dk), *strides(dv),
            qk_scale, sm_scale, sections, *sched, *stat_descs, *option_args, **option_flags,
            HEAD_DIM=D, BLOCK_M=WS_BLOCK_M, GROUP=H // H_kv, CAUSAL=causal, VARLEN=varlen, NUM_BUF=WS_STAGES[D],
            DTYPE=TL_DTYPES[q.dtype], PREFETCH_STATS=WS_PREFETCH_STATS[D], DEFER_DQ=WS_DEFER_DQ[D] and not drift,
            DRIFT=drift, PERSISTENT=persistent, STATS_SMEM=stats_smem, DYNAMIC=dynamic, DQ_ROWS=dq_rows,
            num_warps=4)
    dq.copy_(dq_acc.view(-1).as_strided(q.shape, q.stride()))
    return dq, dk, dv
