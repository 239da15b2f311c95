"""``tlxc.ops.attention``: softmax attention, forward on the warp-specialized Hopper kernel.

    o = softmax(q kᵀ · sm_scale [+ causal mask]) v

Dense layout (``torch.nn.functional.scaled_dot_product_attention``'s): ``q`` is
``[B, H, Sq, D]``, ``k`` and ``v`` are ``[B, Hkv, Sk, D]`` with ``H % Hkv == 0`` (GQA/MQA:
query head ``h`` attends with key/value head ``h // (H // Hkv)``).  Any strides with a unit
last stride are read in place (BSHD tensors seen as ``x.transpose(1, 2)`` included); other
strides are copied.  Varlen layout (flash-attn's ``flash_attn_varlen_func``): ``q`` is
``[total_q, H, D]``, ``k``/``v`` ``[total_k, Hkv, D]``, sequence ``b`` being rows
``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` (int32 ``[B + 1]``, on the device).

``causal=True`` is top-left aligned, as SDPA's ``is_causal``: query ``i`` sees keys
``j <= i``, also when ``Sq != Sk`` (flash-attn aligns bottom-right instead).
``window=(left, right)`` (flash-attn's ``window_size``, ``-1`` = unbounded on that side): query
``i`` sees only keys ``i - left <= j <= i + right`` (and, causal, ``j <= i``); key blocks wholly
outside a window are not visited.  ``softcap=c`` (Gemma 2's logit softcapping): the scores are
``c * tanh(sm_scale * q.k / c)`` before the softmax (``lse`` is of those).

The forward (``attention_forward``) returns ``o`` (``q``'s dtype; the layout of ``q``:
BSHD-strided ``q`` gives BSHD-strided ``o``) and ``lse``, float32, the natural-log
log-sum-exp of each query row's scaled scores, ``[B, H, Sq]`` dense and ``[H, total_q]``
varlen; a query row with no keys (a varlen sequence of ``k`` length 0, ``Sk = 0``, or no key
inside its window) gets ``o = 0`` and ``lse = -inf``.  The backward (``kernels/attention_bwd.py``) takes them back.
"""
from __future__ import annotations

import heapq
import itertools
import math
import os
import threading
from dataclasses import dataclass, replace

import torch

from .. import language as tl
from ..descriptors import TensorDescriptor
from .compile_only import CompileOnly
from .kernels.attention_fwd import D_BOX, LOG2E, TRACE_STAGES, attn_fwd_kernel
from .kernels.attention_schedule import varlen_check_kernel, varlen_rank_kernel, varlen_table_kernel
from .kernels.transpose import transpose_last2_kernel

DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
FP8_DTYPES = {torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5}   # the forward only
FP8_OUT_DTYPES = (torch.bfloat16, torch.float16)
HEAD_DIMS = range(8, 257, 8)    # head dims: rows of 16 bytes (TMA); tiles of 64, 128 or 256 columns, the rest masked
FP8_HEAD_DIMS = range(16, 257, 16)
CPU_PROGRAMS = 3          # persistent programs on the interpreter
H200_SMS = 132            # compile_config's programs: the launch on an H200
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class AttnConfig:
    """One launch configuration of ``attn_fwd_kernel``."""
    head_dim: int         # tile width: D rounded up to 64, 128 or 256
    block_m: int          # query rows per work item (64 per consumer warp group: 128, 192, or 256 at head dim 64)
    block_n: int          # keys per block
    stages: int           # K/V ring slots
    q_bufs: int           # Q tiles in flight (2: the next item's Q loads while this one runs)
    overlap: bool = False  # an item's last P V issued with the next item's first Q K^T
    prefetch: int = 0     # L2 prefetches of the next item's Q and first `prefetch` K/V blocks (0: none)
    tma_store: bool = False  # O staged in shared memory and TMA-stored (dense only; default at S >= 512)
    diag_skip: bool = True   # causal, key blocks smaller than the item: each consumer stops at its own diagonal
    pin_softmax: bool = False  # a shared store of l_i before P V's wait: ptxas keeps the softmax ahead of it
    exp_fma: int = 0      # k >= 2: every k-th exponential of a thread on the FMA pipe (tlx.fast_exp2); 0: none
    skew: bool = False    # two consumers: the second issues one turn behind the first (item starts overlap products)
    diag: int = 0         # benchmarks only: DIAG bits leaving a stage of each item out (the output is wrong)
    s1_ahead: bool = False  # dense, unmasked, keys past one block: an item's S_1 issued with S_0 (its first softmax
    #                         runs beside S_1); elsewhere it does not apply (issues_s1_ahead)
    k_ahead: bool = False  # the producer loads K blocks one ahead of V blocks (K_0, K_1, V_0, K_2, V_1, ..): the
    #                       consumers' order; off: K_j, V_j (K_1 then waits for V_0's slot)
    early_lse: bool = False  # 1 / l and the lse store issued while an item's last P V runs (not after its wait)

    def skips_diagonal(self, causal: bool) -> bool:
        """Whether a causal launch lets each consumer stop at its own rows' diagonal: with key
        blocks smaller than the item (D = 256: 64-key blocks, 128-row items) the first consumer's
        64 rows see no key of the item's last block; it passes its turns and releases those
        slots instead of computing a fully masked block (not with ``overlap``)."""
        return self.diag_skip and causal and self.block_n < self.block_m and not self.overlap

    def issues_s1_ahead(self, causal: bool, varlen: bool, window: bool, seq_k: int) -> bool:
        """Whether the launch issues each item's ``S_1`` in the turn of its ``S_0`` (``S1_AHEAD``):
        every consumer must have two key blocks or more, so dense launches without a causal mask or a
        window whose ``seq_k`` is past one key block (not with ``overlap``, which the config refuses)."""
        return self.s1_ahead and not (causal or varlen or window) and seq_k > self.block_n

    @property
    def registers(self) -> int:
        """A consumer warp group's register budget: two consumers 240, three 160, four 112 (640 threads
        start with 96 registers each, 61,440 in all: four consumers at 112 leave the producer 32)."""
        return {128: 240, 192: 160, 256: 112}[self.block_m]

    @property
    def o_parts(self) -> int:
        """O accumulators per consumer: 2 (128 columns each) for TMA stores of 256-wide tiles, so
        each half is staged through one 128-column buffer (a whole 256-wide one does not fit)."""
        return 2 if self.tma_store and self.head_dim == 256 else 1

    def shared_bytes(self, elt: int = 2) -> int:
        """The shared memory of the Q buffers and the K/V ring (``elt`` bytes an element: 1 for
        fp8), the O staging tiles (16-bit) and the pinned-softmax rows; barriers not counted."""
        o_rows = self.block_m // self.o_parts if self.tma_store else 0
        return self.head_dim * (elt * (self.q_bufs * self.block_m + 2 * self.stages * self.block_n) + 2 * o_rows) + \
            (4 * self.block_m if self.pin_softmax else 0)


def tile_dim(D: int) -> int:
    return 64 if D <= 64 else 128 if D <= 128 else 256


def choose_config(D: int, causal: bool, S: int | None = None, varlen: bool = False, fp8: bool = False) -> AttnConfig:
    """The configuration for head dim ``D`` and ``S`` query rows (the longest sequence):

    * D <= 64 without a mask: three consumers (192 rows per item, measured 3-8% faster than
      two at S = 4096, docs/performance.md) when the rows padded to 192 are within 4% of those
      padded to 128 (S = 2048, 4096, 8192: yes; S = 256, 512, 1024: 50%, 12.5%, 12.5% more
      rows, so two consumers); varlen batches take 128 (each sequence pads its last block);
      under a causal mask 128 (the diagonal blocks of 192 rows cost more than the third
      consumer gains);
    * D <= 128: 128 rows, 128-key blocks, two stages, two Q buffers (192 KB of shared memory);
    * D > 128 (256-wide tiles): 64-key blocks and one Q buffer (64 KB of Q + 2 x 64 KB of K/V);
    * dense, causal, S <= 256, D <= 128: four stages of 64-key blocks (the same ring bytes), so
      that each consumer stops at its own diagonal (``diag_skip``: the first consumer skips the
      item's last 64 keys, 17% of the work at S = 256).  H200, session 13 run 2, D = 64: 6-7%
      faster than 128-key blocks at S = 256 causal, 3% slower at S = 512 (13% slower without the
      mask: more issue rounds per key).
    * dense, causal, S >= 512, D <= 64, 16-bit inputs, rows padded to 256 within 4 % of those padded to 128
      (as for three consumers): four consumers (``block_m = 256``: 256-row items of
      64-key blocks, six stages, two Q buffers, O TMA-stored; 112 registers a consumer).  H100, session
      35, two or three runs: 0.94-0.97 of the default's time at S = 512 / 1024, 0.924-0.931 at S = 2048-16384
      (MHA and GQA-4); without the mask even at S = 512 and 2048, 2.5 % faster at 1024, 3-10 % slower past
      2048 (against three consumers) and at S = 256.  Not yet timed on the H200.
    * dense, no mask, S <= 256, D <= 64, 16-bit inputs: ``s1_ahead`` (an item's ``S_1`` issued with its ``S_0``;
      fp8 not timed).
      H100, session 32, two runs: 0.959 / 0.973-0.976 of the default's time at S = 256 (MHA / GQA-4);
      slower at S = 512 (1.03-1.08), at D = 128 (0.985-1.022) and D = 256 (1.08-1.14).

    Dense shapes with 128-row items stage O in shared memory for TMA stores (``tma_store``),
    at every S and tile width: 256-wide tiles as two 128-column halves (``AttnConfig.o_parts``;
    224 KB of shared memory with the staging tiles).  H200: 11-21% faster than the 32-bit pointer
    stores at S = 512 / 1024 (D <= 128, session 12 run 3), 7-21% at S = 256 (session 13 run 1;
    session 12's "slower at S = 256" was measured on top of the L2 prefetch); not the 192-row
    items (their consumers spill 8 bytes more; the best case already).  Varlen keeps pointer
    stores by default: ``tma_store=True`` is allowed there up to 128-wide tiles (a consumer whose
    rows reach past its sequence's end stores those by pointers: a TMA box would write the next
    sequence's rows), but the H200 (session 13 run 2) measured it 0.87-1.06 of the pointer
    stores' speed on mixed batches (geomean 0.96) and 1.075 on the 4 x 4096 control.  The L2 prefetch of the next item
    (``prefetch``) and deeper rings were slower everywhere on the H200 and stay opt-in
    (docs/performance.md "small S").

    fp8 inputs keep two consumers at D = 64: with three, each spills 28 bytes (160 registers), and the
    H200 measured that kernel at 439 TF/s against 505 before P's fragments changed (session 18 runs 2
    and 6, S = 4096 non-causal).
    """
    hd = tile_dim(D)
    if hd == 64:
        three = not causal and not varlen and not fp8 and S is not None and \
            -(-S // 192) * 192 <= 1.04 * (-(-S // 128) * 128)
        c = AttnConfig(64, 192 if three else 128, 128, 2, 2)
    elif hd == 128:
        c = AttnConfig(128, 128, 128, 2, 2)
    else:
        c = AttnConfig(256, 128, 64, 2, 1)
    if causal and not varlen and S is not None and S <= 256 and c.block_m == 128 and hd <= 128:
        c = replace(c, block_n=64, stages=4)
    if hd == 64 and not causal and not varlen and not fp8 and S is not None and S <= 256 and c.block_m == 128:
        c = replace(c, s1_ahead=True)   # applies where the keys pass one block (issues_s1_ahead)
    if hd == 64 and causal and not varlen and not fp8 and S is not None and S >= 512 and \
            -(-S // 256) * 256 <= 1.04 * (-(-S // 128) * 128):             # (S = 600: 768 rows, not 640)
        return AttnConfig(64, 256, 64, 6, 2, tma_store=True)                # four consumers
    return replace(c, tma_store=True) if not varlen and S is not None and c.block_m == 128 else c


# -- the work schedule -------------------------------------------------------------------------------

def schedule(Sq: int, Sk: int, BH: int, block_m: int, block_n: int, causal: bool, programs: int,
             group_h: int, window: tuple[int, int] = (-1, -1)) -> torch.Tensor:
    """Dense shapes: the work items of each of ``programs`` persistent programs, as a CPU int32
    table whose row p is ``[count, item, item, ...]`` (item = bh * query blocks + query block).
    Longest processing time first: items ordered ``group_h`` heads at a time (programs running
    together share K/V in L2), within a group by decreasing length (key blocks, plus one for
    the item's own prologue and epilogue), each given to the least-loaded program so far.
    ``window`` (left, right; -1 unbounded): the blocks an item of a sliding window visits."""
    num_m = -(-Sq // block_m)
    left, right = window

    def length(m):
        end = min(Sk, (m + 1) * block_m) if causal else Sk
        if right >= 0:
            end = min(end, (m + 1) * block_m + right)
        first = max(m * block_m - left, 0) // block_n if left >= 0 else 0
        return max(-(-end // block_n) - first, 0)
    order = []
    for g in range(0, BH, group_h):
        heads = range(g, min(BH, g + group_h))
        order += sorted(((length(m), bh * num_m + m) for bh in heads for m in range(num_m)),
                        key=lambda x: (-x[0], x[1]))
    programs = max(1, min(programs, len(order)))
    loads = [(0, p) for p in range(programs)]
    heapq.heapify(loads)
    rows = [[] for _ in range(programs)]
    for n, item in order:
        load, p = heapq.heappop(loads)
        rows[p].append(item)
        heapq.heappush(loads, (load + n + 1, p))
    width = 1 + max(len(r) for r in rows)
    table = torch.zeros((programs, width), dtype=torch.int32)
    for p, r in enumerate(rows):
        table[p, 0] = len(r)
        table[p, 1:1 + len(r)] = torch.tensor(r, dtype=torch.int32)
    return table


def snake_schedule(num_m: int, BH: int, causal: bool, programs: int, group_h: int) -> torch.Tensor:
    """Varlen shapes (the lengths stay on the device): items ``group_h`` heads at a time,
    within a group by decreasing query block when causal (later blocks see more keys),
    dealt to the programs in a snake order (0 .. P-1, P-1 .. 0, ...).  Built with tensor
    operations: it changes with every batch's ``max_seqlen_q``."""
    n = num_m * BH
    bh = torch.arange(BH).repeat_interleave(num_m)
    m = torch.arange(num_m).repeat(BH)
    items = bh * num_m + m
    key = (bh // group_h) * (2 * num_m * BH) + ((num_m - 1 - m) if causal else m) * BH + bh
    items = items[torch.argsort(key)]
    programs = max(1, min(programs, n))
    rounds = -(-n // programs)
    padded = torch.full((rounds * programs,), -1, dtype=torch.int64)
    padded[:n] = items
    grid = padded.view(rounds, programs)
    grid[1::2] = grid[1::2].flip(1)
    grid = grid.t()              # [programs, rounds]; only the last round has -1s, so they end the rows
    table = torch.zeros((programs, rounds + 1), dtype=torch.int32)
    table[:, 0] = (grid >= 0).sum(1).to(torch.int32)
    table[:, 1:] = grid.clamp_min(0).to(torch.int32)
    return table


VARLEN_ORDERS = ("sorted", "snake")


def _varlen_order_of(order: str | None) -> str:
    """The varlen schedule: ``order`` if given, else ``$TLXC_ATTN_VARLEN`` (default ``sorted``:
    built by two small kernels it ran 0.84-0.97 of ``snake``'s time on the H200, session 12 run
    2; built by ~20 torch operations it had cost 0.6-0.7 ms per call, docs/performance.md)."""
    order = order or os.environ.get("TLXC_ATTN_VARLEN") or "sorted"
    if order not in VARLEN_ORDERS:
        raise _fail(f"the varlen schedule must be one of {', '.join(VARLEN_ORDERS)} (argument 'varlen_order' or "
                    f"$TLXC_ATTN_VARLEN), got {order!r}")
    return order


def varlen_items(B: int, H: int, num_m: int, block_m: int, causal: bool, group_h: int) -> torch.Tensor:
    """The fixed part of ``sorted_varlen_schedule`` for a shape, int64 ``[5, B * H * num_m]``:
    each candidate item ``t`` (the kernel's ``(b * H + h) * NUM_M + m``), its order within
    the items of its sequence (non-causal: ``b``, head, block; causal: the base of its
    sequence's head group, the lengths decide the rest), its sequence ``b``, its first query
    row ``m * block_m`` and ``m``."""
    b = torch.arange(B).view(B, 1, 1)
    h = torch.arange(H).view(1, H, 1)
    m = torch.arange(num_m).view(1, 1, num_m)
    item = (b * H + h) * num_m + m
    if causal:      # b, head group, then (per call) pair, head in the group, long or short
        within = b * _causal_span(H, num_m, group_h) + (h // group_h) * (group_h * (num_m + 1)) + 2 * (h % group_h)
    else:
        within = b * (H * num_m) + h * num_m + m
    return torch.stack([x.expand(B, H, num_m).flatten() for x in (item, within, b, m * block_m, m)])


def _causal_span(H: int, num_m: int, group_h: int) -> int:
    return -(-H // group_h) * group_h * (num_m + 1)


def varlen_slots(n: int, programs: int, rounds: int, per: int) -> torch.Tensor:
    """Where the snake deal puts list position ``i < n``: units of ``per`` consecutive
    positions dealt in rounds of ``programs`` units, every other round reversed.  int64
    ``[2, programs, rounds * per]``: the position at each (program, slot), and the same
    clamped below ``n`` (a slot past the list reads some item, never counted: a row's
    positions increase, so the first ``count`` of them are the listed ones)."""
    unit = torch.arange(rounds * programs).view(rounds, programs)
    unit[1::2] = unit[1::2].flip(1)
    unit = unit.t()                                           # [programs, rounds]
    pos = (unit[:, :, None] * per + torch.arange(per)).reshape(programs, rounds * per)
    return torch.stack([pos, pos.clamp_max(n - 1)])


def sorted_varlen_schedule(cu_q: torch.Tensor, cu_k: torch.Tensor, total_q: int, num_m: int, H: int,
                           block_m: int, causal: bool, programs: int, group_h: int) -> torch.Tensor:
    """Varlen shapes: the table of ``schedule`` built on the device from ``cu_seqlens_q/k``
    with tensor operations (no host sync; the fixed parts per shape are copied once, as
    the dense tables).  Only real items (query blocks inside their sequence) are listed:
    sequences by decreasing key length (ties: batch order), within a sequence ``group_h``
    heads at a time; non-causal each head's blocks together: the list is sorted by item
    length, so the snake deal over the programs is nearly longest-first, and the items
    running at once share a few heads' K/V in L2.  Causal: block ``m`` of a head goes with
    block ``n - 1 - m`` (``n`` the sequence's blocks; a long and a short item, together one
    sequence's worth of keys), the pairs from the outside in, the group's heads in turn; the
    snake deals pairs, so each program gets both items of a pair and the pairs' lengths fall
    along the list.  ``device_sorted_schedule`` builds the same table in two kernel launches
    (what ``attention_forward`` runs); this one is its reference in the tests."""
    dev = cu_q.device
    B = cu_q.shape[0] - 1
    n = B * H * num_m
    per, programs, rounds = _sorted_shape(B, H, num_m, total_q, block_m, causal, programs)
    item, within, b, row, m = _table_on(dev, varlen_items, B, H, num_m, block_m, causal, group_h)
    pos, pos_in = _table_on(dev, varlen_slots, n, programs, rounds, per)
    lens = torch.stack((cu_q, cu_k)).diff()                              # [2, B]: query and key lengths
    seq_key = lens[1].max() - lens[1]                                   # longest keys first
    if causal:
        span = B * _causal_span(H, num_m, group_h)
        mirror = ((lens[0] + (block_m - 1)) // block_m)[b] - 1 - m      # n - 1 - m
        within = within + (2 * group_h) * torch.minimum(m, mirror) + (m < mirror)
    else:
        span = n
    real = row < lens[0][b]
    key = torch.where(real, torch.add(within, seq_key[b], alpha=span), within + (2**62 - span))
    items = item[torch.argsort(key)]
    table = torch.empty((programs, rounds * per + 1), dtype=torch.int32, device=dev)
    table[:, 0] = (pos < real.sum()).sum(1)
    table[:, 1:] = items[pos_in]
    return table


RANK_BLOCK = 64          # sequences per program of varlen_rank_kernel (and per compared chunk)
CHECK_BLOCK = 1024       # sequences per program of varlen_check_kernel


def _sorted_shape(B: int, H: int, num_m: int, total_q: int, block_m: int, causal: bool,
                  programs: int) -> tuple[int, int, int]:
    """(positions per unit, programs, rounds) of the sorted varlen table: at most ``cap`` real
    items (every sequence's blocks, bounded by the packed rows), dealt ``per`` at a time."""
    per = 2 if causal else 1
    cap = H * min(B * num_m, (total_q + B * (block_m - 1)) // block_m)
    programs = max(1, min(programs, -(-cap // per)))
    return per, programs, -(-cap // (per * programs))


def device_sorted_schedule(cu_q: torch.Tensor, cu_k: torch.Tensor, total_q: int, total_k: int, max_q: int,
                           num_m: int, H: int, block_m: int, causal: bool, programs: int,
                           group_h: int) -> torch.Tensor:
    """``sorted_varlen_schedule``'s table from two small kernels (``kernels/attention_schedule.py``)
    instead of ~20 torch operations (whose host work cost 0.6-0.7 ms per call on the H200): one
    ranks the sequences (and checks ``cu_seqlens``: non-decreasing offsets into the packed rows,
    query lengths at most ``max_q``, as a device assertion), one fills each program's row.  No
    host sync, nothing cached: a CUDA graph replays it with new lengths.  Under
    ``compile_config`` (no launch) the table is left unfilled: only its shape specializes the
    attention kernel."""
    B = cu_q.shape[0] - 1
    per, programs, rounds = _sorted_shape(B, H, num_m, total_q, block_m, causal, programs)
    table = torch.empty((programs, rounds * per + 1), dtype=torch.int32, device=cu_q.device)
    if _COMPILE_ONLY.active:
        return table
    scratch = torch.empty((2, B + 1), dtype=torch.int32, device=cu_q.device)     # start by rank, b by rank
    varlen_rank_kernel[(-(-B // RANK_BLOCK),)](cu_q, cu_k, scratch[0], scratch[1], B, H, total_q, total_k, max_q,
                                              BLOCK_M=block_m, BLOCK_B=RANK_BLOCK, CHUNK=RANK_BLOCK, num_warps=4)
    slots = max(2, 1 << (rounds * per - 1).bit_length())
    varlen_table_kernel[(programs,)](cu_q, scratch[0], scratch[1], table, B, H, num_m, programs, rounds,
                                     table.stride(0), group_h, BLOCK_M=block_m, SLOTS=slots, PER=per, CAUSAL=causal,
                                     SEARCH_STEPS=max(1, B.bit_length()), num_warps=4)
    return table


_TABLES: dict[tuple, torch.Tensor] = {}      # (schedule arguments, device) -> the table on that device
_TABLES_LOCK = threading.Lock()


def _table_on(device: torch.device, build, *args) -> torch.Tensor:
    """``build(*args)`` on ``device``, built once per shape.  Building it copies a table from
    the host, which a CUDA graph capture does not allow: the first call for a shape must come
    before the capture."""
    key = (build.__name__, *args, str(device))
    table = _TABLES.get(key)
    if table is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("tlxc.ops.attention: the first call for these shapes builds the work schedule on "
                               "the host and copies it to the GPU, which a CUDA graph capture does not allow; "
                               "call attention once with these shapes before capturing")
        table = build(*args).to(device)
        with _TABLES_LOCK:
            if len(_TABLES) >= 256:
                _TABLES.clear()
            _TABLES[key] = table
    return table


# -- argument checks ---------------------------------------------------------------------------------

def stride_align(*tensors: torch.Tensor) -> int:
    """The largest power of two, at most 8 (16 bytes of a 16-bit element), dividing every stride but the
    unit one of ``tensors`` (dimensions longer than 1): the ``ALIGN`` / ``O_ALIGN`` constexpr of the
    kernels that address rows through pointers (the forward's O stores, the ``tl.dot`` backward).  The
    launch knows only "divisible by 16" per argument: at head dims that are odd multiples of 8 (40, 72,
    136) the row strides are not, and without the fact every access is element by element (the backward:
    240-255 registers and spills; the forward's varlen O: 2-byte stores)."""
    return ints_align(*(stride for t in tensors for size, stride in zip(t.shape[:-1], t.stride()[:-1]) if size > 1))


def ints_align(*values: int) -> int:
    """The largest power of two, at most 8, dividing every one of ``values`` (8 when all are 0)."""
    g = 0
    for value in values:
        g = math.gcd(g, value)
    return min(8, g & -g) if g else 8


def _fail(message: str) -> ValueError:
    return ValueError(f"tlxc.ops.attention: {message}")


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when TMA can read it (unit last stride, 16-byte aligned base and positive
    strides), else a contiguous copy (a broadcast dimension's stride 0 among them: ``expand``)."""
    e = t.element_size()
    if t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(
            s > 0 and (s * e) % 16 == 0 for d, s in enumerate(t.stride()[:-1]) if t.shape[d] > 1):
        return t
    return t.contiguous()


def _out_like(q: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The output of a dense ``[B, H, S, D]`` ``q`` (in ``dtype``, default q's): BSHD memory
    (``[B, S, H, D]`` transposed) when ``q``'s head stride is below its sequence stride, else
    BHSD.  The fake implementation of the custom op calls this too, so the strides agree."""
    B, H, S, D = q.shape
    dtype = dtype or q.dtype
    if q.dim() == 4 and q.stride(1) < q.stride(2) and H > 1 and S > 1:
        return q.new_empty((B, S, H, D), dtype=dtype).transpose(1, 2)
    return q.new_empty((B, H, S, D), dtype=dtype)


def _check_common(q, k, v, *, op: str = "tlxc.ops.attention", names: tuple[str, str] = ("k", "v"),
                  head_dims=HEAD_DIMS, fp8: bool = False) -> None:
    """The checks every attention op makes of its q, k and v: tensors, one 16-bit float dtype
    (or, ``fp8``, an fp8 one), one device, one head dim among ``head_dims`` (a tuple, or a
    range); ``op`` and ``names`` name them in the errors (``attention_decode`` passes its own:
    ``k_cache``, ``v_cache``)."""
    for name, t in (("q", q), *zip(names, (k, v))):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: '{name}' must be a tensor, got {type(t).__name__}")
    if q.dtype not in DTYPES and not (fp8 and q.dtype in FP8_DTYPES):
        kinds = "bfloat16, float16, float8_e4m3fn or float8_e5m2" if fp8 else "bfloat16 or float16"
        raise ValueError(f"{op}: 'q' must be {kinds}, got {q.dtype}")
    for name, t in zip(names, (k, v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{op}: '{name}' must have q's dtype {q.dtype}, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{op}: '{name}' is on {t.device}, 'q' on {q.device}")
    D = q.shape[-1]
    if fp8 and q.dtype in FP8_DTYPES and head_dims is HEAD_DIMS:
        head_dims = FP8_HEAD_DIMS                 # (1-byte elements: 16 of them to a 16-byte row)
    if D not in head_dims:
        if isinstance(head_dims, range) and head_dims.step > 1:
            supported = f"multiples of {head_dims.step} from {head_dims.start} to {head_dims.stop - 1}"
        elif isinstance(head_dims, range):
            supported = f"{head_dims.start}..{head_dims.stop - 1}"
        else:
            supported = ", ".join(map(str, head_dims))
        raise ValueError(f"{op}: 'q' has head dim {D}; supported: {supported}")
    for name, t in zip(names, (k, v)):
        if t.shape[-1] != D:
            raise ValueError(f"{op}: '{name}' has head dim {t.shape[-1]}, 'q' has {D} (one head dim for q, k and v)")


def _check_heads(H: int, Hkv: int) -> None:
    if H == Hkv == 0:            # no heads at all: an empty result, as for B = 0 or S = 0
        return
    if Hkv == 0 or H % Hkv:
        raise _fail(f"'k'/'v' have {Hkv} heads, which must divide q's {H} heads (GQA/MQA)")


def _check_cu(name: str, cu, B1: int | None, device) -> None:
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"tlxc.ops.attention: '{name}' must be an int32 tensor, got {type(cu).__name__}")
    if cu.dtype != torch.int32 or cu.dim() != 1 or cu.shape[0] < 1:
        raise _fail(f"'{name}' must be a 1-D int32 tensor of batch + 1 offsets, got {cu.dtype} "
                    f"{tuple(cu.shape)}")
    if B1 is not None and cu.shape[0] != B1:
        raise _fail(f"'{name}' has {cu.shape[0]} entries, 'cu_seqlens_q' {B1} (one batch for both)")
    if cu.device != device:
        raise _fail(f"'{name}' is on {cu.device}, 'q' on {device}")


def _check_lengths_now(name: str, cu: torch.Tensor, total: int, max_name: str, max_len: int | None) -> int:
    """Reads ``cu`` (a host sync on the GPU): offsets from 0..total, non-decreasing; returns
    the longest sequence, checked against ``max_len`` when given."""
    offs = cu.tolist()
    lens = [b - a for a, b in itertools.pairwise(offs)]
    if offs[0] < 0 or any(n < 0 for n in lens) or offs[-1] > total:
        raise _fail(f"'{name}' must be non-decreasing offsets in 0..{total} (the rows of the packed tensor), "
                    f"got {offs[:8]}{' ...' if len(offs) > 8 else ''}")
    longest = max(lens, default=0)
    if max_len is not None and max_len < longest:
        raise _fail(f"'{max_name}' is {max_len} but a sequence in '{name}' has {longest} rows")
    return longest


def _check_lengths_on_device(cu_q: torch.Tensor, cu_k: torch.Tensor, total_q: int, total_k: int, max_q: int) -> None:
    """The checks of ``_check_lengths_now`` for ``cu_seqlens_q`` (with ``max_q``) and
    ``cu_seqlens_k`` as one device assertion (``kernels/attention_schedule.py:
    varlen_check_kernel``; no host sync, one launch)."""
    B = cu_q.shape[0] - 1
    varlen_check_kernel[(-(-max(B, 1) // CHECK_BLOCK),)](cu_q, cu_k, B, total_q, total_k, max_q, BLOCK=CHECK_BLOCK,
                                                        num_warps=4)


# -- launching ---------------------------------------------------------------------------------------

_COMPILE_ONLY = CompileOnly()          # compile_config: launches compile for sm_90a instead


def _launch(grid, *args, **meta) -> None:
    _COMPILE_ONLY.launch(attn_fwd_kernel, grid, *args, **meta)


def _descriptor(t4: torch.Tensor, rows: int, cols: int = D_BOX) -> TensorDescriptor:
    """A 4-D descriptor of ``t4`` with boxes of ``rows`` x ``cols`` columns (swizzled by their
    row's bytes, at most 128).  A dimension of size 1 never moves the address, so its stride
    (which torch leaves arbitrary) is replaced by an aligned one, as TMA requires of every
    stride."""
    strides = tuple(t4.stride())
    per16 = 16 // t4.element_size()
    aligned = -(-max(strides[:-1]) // per16) * per16
    strides = tuple(aligned if n == 1 and d < 3 else s for d, (n, s) in enumerate(zip(t4.shape, strides)))
    return TensorDescriptor(t4, tuple(t4.shape), strides, [1, 1, rows, cols],
                            swizzle=min(128, cols * t4.element_size()))


def _programs(device: torch.device, programs: int | None) -> int:
    if programs is not None:
        if programs < 1:
            raise _fail(f"'programs' must be at least 1, got {programs}")
        return programs
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return CPU_PROGRAMS


def check_scale(value, name: str = "sm_scale") -> None:
    """A softmax scale: a positive finite number (``name``: the caller's spelling, ``scale`` for SDPA's)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _fail(f"'{name}' must be a positive finite number, got {value!r}")


def check_args(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> float:
    """Every rule on the arguments that does not read a tensor's values (the fake
    implementation of the custom op runs it too); returns the scale."""
    _check_common(q, k, v, fp8=True)
    if not isinstance(causal, bool):
        raise TypeError(f"tlxc.ops.attention: 'causal' must be a bool, got {type(causal).__name__}")
    D = q.shape[-1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    else:
        check_scale(sm_scale)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise _fail(f"'{'cu_seqlens_q' if cu_seqlens_q is None else 'cu_seqlens_k'}' is missing: the varlen "
                        f"layout takes both")
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.dim() != 3:
                raise _fail(f"with cu_seqlens, '{name}' must be [total, heads, D], got {tuple(t.shape)}")
        if k.shape != v.shape:
            raise _fail(f"'k' {tuple(k.shape)} and 'v' {tuple(v.shape)} must have one shape")
        _check_cu("cu_seqlens_q", cu_seqlens_q, None, q.device)
        _check_cu("cu_seqlens_k", cu_seqlens_k, cu_seqlens_q.shape[0], q.device)
        H, Hkv = q.shape[1], k.shape[1]
    else:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise _fail("'max_seqlen_q'/'max_seqlen_k' belong to the varlen layout (with cu_seqlens_q/k)")
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.dim() != 4:
                raise _fail(f"'{name}' must be [B, heads, S, D] (or [total, heads, D] with cu_seqlens), "
                            f"got {tuple(t.shape)}")
        if k.shape != v.shape:
            raise _fail(f"'k' {tuple(k.shape)} and 'v' {tuple(v.shape)} must have one shape")
        B, H, _, _ = q.shape
        if k.shape[0] != B:
            raise _fail(f"'k'/'v' have batch {k.shape[0]}, 'q' has {B}")
        Hkv = k.shape[1]
    _check_heads(H, Hkv)
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if value is not None and (not isinstance(value, (int, torch.SymInt)) or value < 0):
            raise _fail(f"'{name}' must be a non-negative int, got {value!r}")
    return sm_scale


def check_window(window, causal: bool) -> tuple[int, int]:
    """``window`` as the kernel's ``(WIN_LEFT, WIN_RIGHT)`` (-1: unbounded on that side; under
    ``causal`` the right side is the diagonal, so -1); ``(-1, -1)`` for no window."""
    if window is None:
        return -1, -1
    if not isinstance(window, (tuple, list)) or len(window) != 2 or \
            not all(isinstance(w, int) and not isinstance(w, bool) for w in window):
        raise _fail(f"'window' must be a pair of ints (left, right), -1 for no bound on a side (flash-attn's "
                    f"window_size), got {window!r}")
    left, right = window
    if left < -1 or right < -1:
        raise _fail(f"'window' sides must be >= 0, or -1 for no bound, got {tuple(window)}")
    if left >= _INT32_MAX // 2 or right >= _INT32_MAX // 2:       # as good as unbounded, and no overflow
        left, right = (-1 if left >= _INT32_MAX // 2 else left), (-1 if right >= _INT32_MAX // 2 else right)
    return left, -1 if causal else right


DESCALES = ("q_descale", "k_descale", "v_descale")


def check_fp8(q, descales: tuple, out_dtype, k=None, cu_seqlens_q=None) -> torch.dtype:
    """The fp8 rules (after ``check_args``); returns ``o``'s dtype.  ``descales`` (q, k, v):
    None, a positive finite number, or a float tensor of one element or of shape ``(B, Hkv)``
    (flash-attn 3's; checked against ``k``'s kv heads and the batch, ``cu_seqlens_q``'s for a
    packed batch, when ``k`` is given) on q's device; the scores are ``q.k * sm_scale *
    q_descale * k_descale`` and ``o`` is multiplied by ``v_descale``.  ``out_dtype``: bfloat16
    (default) or float16.  16-bit inputs take neither (``o`` has q's dtype)."""
    if q.dtype not in FP8_DTYPES:
        for name, d in zip(DESCALES, descales):
            if d is not None:
                raise _fail(f"'{name}' scales fp8 inputs; q is {q.dtype}")
        if out_dtype is not None and out_dtype != q.dtype:
            raise _fail(f"'out_dtype' is for fp8 inputs; {q.dtype} inputs give o in {q.dtype}, got {out_dtype}")
        return q.dtype
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if out_dtype not in FP8_OUT_DTYPES:
        raise _fail(f"'out_dtype' of an fp8 attention must be torch.bfloat16 or torch.float16, got {out_dtype}")
    for name, d in zip(DESCALES, descales):
        if d is None:
            continue
        if isinstance(d, torch.Tensor):
            if not d.is_floating_point() or d.device != q.device:
                raise _fail(f"'{name}' must be a float tensor on {q.device}, got {d.dtype} on {d.device}")
            if d.numel() != 1 and d.dim() != 2:
                raise _fail(f"'{name}' must have one element or shape (batch, kv heads), got {tuple(d.shape)}")
            if d.numel() != 1 and isinstance(k, torch.Tensor) and k.dim() >= 3:
                batch = q.shape[0] if cu_seqlens_q is None else cu_seqlens_q.shape[0] - 1
                if tuple(d.shape) != (batch, k.shape[1]):
                    raise _fail(f"'{name}' has shape {tuple(d.shape)}; per-head descales are (batch, kv heads) = "
                                f"({batch}, {k.shape[1]})")
        elif isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or d <= 0:
            raise _fail(f"'{name}' must be a positive finite number or a float tensor, got {d!r}")
    return out_dtype


def descale_table(descales: tuple, B: int, Hkv: int, device) -> torch.Tensor | None:
    """float32 ``[B * Hkv, 2]``: ``(q_descale * k_descale, v_descale)`` per (batch, kv head), or
    None when no descale is given (device operations only: no host sync; shapes checked by
    ``check_fp8``)."""
    if all(d is None for d in descales):
        return None
    parts = []
    for name, d in zip(DESCALES, descales):
        if d is None:
            d = torch.ones((), dtype=torch.float32, device=device)
        elif not isinstance(d, torch.Tensor):
            d = torch.full((), float(d), dtype=torch.float32, device=device)
        elif d.numel() == 1:
            d = d.reshape(())
        parts.append(d.to(torch.float32).expand(B, Hkv))
    return torch.stack((parts[0] * parts[1], parts[2]), dim=-1).reshape(B * Hkv, 2).contiguous()


TRANSPOSE_TILE = 64      # transpose_last2_kernel's tile (S and D)


def k32_position(k: torch.Tensor) -> torch.Tensor:
    """Where key ``k`` (of a 32-aligned run) goes in Vᵀ so that ``tlx.async_dot(p, vt,
    a_k_order="accumulator")`` pairs it with P's column ``k``: ``16h + 8a + 2q + b -> 16h + 4q +
    2a + b`` within its group of 32 (``k32_accumulator_order``'s inverse)."""
    j = k % 32
    return k - j + (j // 16) * 16 + ((j // 2) % 4) * 4 + ((j // 8) % 2) * 2 + j % 2


def transposed_v(v: torch.Tensor) -> torch.Tensor:
    """fp8 ``v`` ``[B, Hkv, S, D]`` as Vᵀ ``[B, Hkv, D, S32]`` for the kernel's TMA boxes: the keys
    of each group of 32 in the order the kernel's P fragments read them (``k32_position``), ``S``
    rounded up to 32 with zero columns.  One copy of V per call: wgmma reads an 8-bit B K-major
    only.  On the GPU by ``kernels/transpose.py`` (torch's copy of the transposed view: ~0.17
    TB/s); elsewhere (the interpreter) by torch."""
    B, Hkv, S, D = v.shape
    s32 = -(-S // 32) * 32
    if not _transposes_on_device(v):
        vt = torch.zeros((B, Hkv, D, s32), dtype=v.dtype, device=v.device)
        cols = k32_position(torch.arange(S, device=v.device))
        vt.view(torch.uint8).index_copy_(3, cols, v.view(torch.uint8).transpose(-1, -2))
        return vt
    vt = torch.empty((B, Hkv, D, s32), dtype=v.dtype, device=v.device)
    grid = (-(-s32 // TRANSPOSE_TILE), -(-D // TRANSPOSE_TILE), B * Hkv)
    _COMPILE_ONLY.launch(transpose_last2_kernel, grid, v, vt, S, D, Hkv, v.stride(0), v.stride(1), v.stride(2),
                         vt.stride(0), vt.stride(1), vt.stride(2), None, s32, BLOCK_S=TRANSPOSE_TILE,
                         BLOCK_D=TRANSPOSE_TILE, PERMUTE32=True, num_warps=4)
    return vt


def _transposes_on_device(v: torch.Tensor) -> bool:
    """Whether Vᵀ is made by ``kernels/transpose.py`` (on the GPU, or compiled for it under
    ``compile_config``) rather than by torch (the interpreter's path)."""
    return _COMPILE_ONLY.active or (v.device.type == "cuda" and v.stride(-1) == 1)


def transposed_v_varlen(v: torch.Tensor, cu_k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Varlen fp8 ``v`` ``[total_k, Hkv, D]`` as Vᵀ ``(1, Hkv, D, N)`` with sequence ``b``'s keys
    from column ``cu_v[b]``, each start rounded up to 32 (a TMA box must start on a 16-byte
    column, and the P fragments' key order runs in groups of 32: ``k32_position`` of the key's
    index in its sequence), the gaps zero; returns ``(vt4, cu_v)`` (int32 ``[B + 1]``).  Device
    operations only (no host sync): ``N`` bounds the padding by 31 columns per sequence."""
    total, Hkv, D = v.shape
    B = cu_k.shape[0] - 1
    lens = cu_k.diff()
    cu_v = torch.zeros(B + 1, dtype=torch.int32, device=v.device)
    cu_v[1:] = torch.cumsum((lens + 31) // 32 * 32, 0)
    n = -(-(total + 31 * B) // 32) * 32
    vt = torch.zeros((1, Hkv, D, max(n, 32)), dtype=v.dtype, device=v.device)
    rows = torch.arange(total, device=v.device, dtype=torch.int32)
    seq = torch.searchsorted(cu_k, rows, right=True) - 1                 # each key row's sequence
    cols = (cu_v[seq] + k32_position(rows - cu_k[seq])).to(torch.int32)
    if not _transposes_on_device(v):
        vt.view(torch.uint8)[0].index_copy_(2, cols.long(), v.view(torch.uint8).permute(1, 2, 0))
        return vt, cu_v
    grid = (-(-total // TRANSPOSE_TILE), -(-D // TRANSPOSE_TILE), Hkv)
    _COMPILE_ONLY.launch(transpose_last2_kernel, grid, v, vt, total, D, Hkv, 0, v.stride(1), v.stride(0),
                         vt.stride(0), vt.stride(1), vt.stride(2), cols, BLOCK_S=TRANSPOSE_TILE,
                         BLOCK_D=TRANSPOSE_TILE, num_warps=4)
    return vt, cu_v


def check_softcap(softcap) -> float:
    """``softcap`` as the kernel's ``SOFTCAP`` (0.0: none)."""
    if softcap is None:
        return 0.0
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not math.isfinite(softcap) \
            or softcap <= 0:
        raise _fail(f"'softcap' must be a positive finite number (or None), got {softcap!r}")
    return float(softcap)


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                      sm_scale: float | None = None, cu_seqlens_q: torch.Tensor | None = None,
                      cu_seqlens_k: torch.Tensor | None = None, max_seqlen_q: int | None = None,
                      max_seqlen_k: int | None = None, config: AttnConfig | None = None,
                      programs: int | None = None, group_h: int = 16,
                      varlen_order: str | None = None, window: tuple[int, int] | None = None,
                      softcap: float | None = None, q_descale=None, k_descale=None, v_descale=None,
                      out_dtype: torch.dtype | None = None,
                      trace: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o, lse)`` of softmax attention (module docstring for layouts and semantics).

    ``sm_scale``: the scores' scale (default ``1/sqrt(D)``; positive).  Varlen:
    ``cu_seqlens_q``/``cu_seqlens_k`` both given; ``max_seqlen_q`` (at least every query
    length) and ``max_seqlen_k`` spare a host sync when given (on the GPU they are then
    checked by a device-side assertion).  ``config``/``programs``/``group_h`` override the
    launch configuration, the number of persistent programs (default one per SM; 3 on the
    interpreter) and the heads whose items run together (for benchmarks and tests);
    ``varlen_order`` the varlen schedule (``sorted``: only the real items, longest first,
    built on the device from ``cu_seqlens`` by two small kernels, the default; ``snake``:
    every ``(sequence, head, block < max_seqlen_q)`` item, a table cached per shape; default
    ``$TLXC_ATTN_VARLEN``).  ``window`` (left, right; -1: unbounded) and ``softcap``: module
    docstring.  fp8 inputs (``q``, ``k``, ``v`` all float8_e4m3fn or all float8_e5m2):
    ``q_descale``/``k_descale``/``v_descale`` and ``out_dtype`` (``check_fp8``); ``v`` is
    transposed into a copy (``transposed_v``; varlen ``transposed_v_varlen``).  ``trace`` (benchmarks):
    an int64 tensor ``[programs, consumers + 1, items, TRACE_STAGES]`` on q's device that the
    kernel fills with cycle counts at the stage boundaries of each program's first ``items`` items
    (``kernels/attention_fwd.py``, ``TRACE``; ``trace_shape`` gives the shape).
    """
    sm_scale = check_args(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    descales = (q_descale, k_descale, v_descale)
    o_dtype = check_fp8(q, descales, out_dtype, k, cu_seqlens_q)
    fp8 = q.dtype in FP8_DTYPES
    win_left, win_right = check_window(window, causal)
    cap = check_softcap(softcap)
    if group_h < 1:
        raise _fail(f"'group_h' must be at least 1, got {group_h}")
    varlen = cu_seqlens_q is not None
    if varlen_order is not None and not varlen:
        raise _fail("'varlen_order' belongs to the varlen layout (with cu_seqlens_q/k)")
    order = _varlen_order_of(varlen_order) if varlen else None
    D = q.shape[-1]
    if varlen:
        B = cu_seqlens_q.shape[0] - 1
        cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()   # kernels: unit stride
        total_q, H, _ = q.shape
        total_k, Hkv, _ = k.shape
    else:
        B, H, Sq, _ = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]

    if varlen:
        o = q.new_empty(q.shape, dtype=o_dtype)
        lse = torch.empty((H, total_q), device=q.device, dtype=torch.float32)
        on_device = False                       # a length left to the device-side check
        if q.device.type != "cuda" or max_seqlen_q is None:
            max_seqlen_q = _check_lengths_now("cu_seqlens_q", cu_seqlens_q, total_q, "max_seqlen_q", max_seqlen_q)
        else:
            on_device = not _COMPILE_ONLY.active
        if q.device.type != "cuda" or max_seqlen_k is None:
            max_seqlen_k = _check_lengths_now("cu_seqlens_k", cu_seqlens_k, total_k, "max_seqlen_k", max_seqlen_k)
        else:
            on_device = on_device or not _COMPILE_ONLY.active
        Sq, Sk = max_seqlen_q, max_seqlen_k
        early = total_q == 0 or H == 0 or total_k == 0 or B == 0 or Sq == 0
        if on_device and (order != "sorted" or early):     # else the sorted table's rank kernel checks them
            _check_lengths_on_device(cu_seqlens_q, cu_seqlens_k, total_q, total_k, Sq)
        if total_q == 0 or H == 0:
            return o, lse
        if total_k == 0 or B == 0 or Sq == 0:    # no keys, or no query rows in a sequence: TMA cannot
            o.zero_()                           # describe an empty tensor; rows in no sequence get 0, -inf
            o.zero_()
            lse.fill_(float("-inf"))
            return o, lse
    else:
        o = _out_like(q, o_dtype)
        lse = torch.empty((B, H, Sq), device=q.device, dtype=torch.float32)
        if o.numel() == 0:
            return o, lse
        if Sk == 0:
            o.zero_()
            lse.fill_(float("-inf"))
            return o, lse
    c = config or choose_config(D, causal, Sq, varlen, fp8)
    if c.head_dim not in (64, 128, 256):
        raise _fail(f"config head_dim (the tile width) must be 64, 128 or 256, got {c.head_dim!r}")
    if c.head_dim < D:
        raise _fail(f"config tile width {c.head_dim} is below the head dim {D}")
    if not isinstance(c.block_n, int) or c.block_n < 16 or c.block_n > 256 or c.block_n & (c.block_n - 1):
        raise _fail(f"config block_n (keys per block) must be a power of two from 16 to 256, got {c.block_n!r}")
    if not isinstance(c.stages, int) or c.stages < 1 or not isinstance(c.q_bufs, int) or c.q_bufs < 1:
        raise _fail(f"config stages (K/V ring slots) and q_bufs (Q tiles in flight) must be at least 1, got "
                    f"{c.stages!r} and {c.q_bufs!r}")
    if c.block_m not in (128, 192, 256):
        raise _fail(f"config block_m must be 128, 192 or 256 (two, three or four consumer warp groups of 64 rows), "
                    f"got {c.block_m!r}")
    if c.block_m == 256 and c.head_dim != 64:
        raise _fail(f"config block_m 256 (four consumer warp groups at 112 registers each) takes tile width 64 only "
                    f"(head dims up to 64): a {c.head_dim}-wide O tile spills there")
    if not isinstance(c.prefetch, int) or c.prefetch < 0:
        raise _fail(f"config prefetch must be a non-negative int (K/V blocks), got {c.prefetch!r}")
    if c.o_parts == 2 and c.overlap:
        raise _fail("config overlap with tma_store at 256-wide tiles is not supported (the overlapped product "
                    "keeps one 256-column accumulator; the staged store needs two halves)")
    if c.skew and (c.block_m != 128 or c.overlap):
        raise _fail("config skew takes two consumers (block_m 128) and no overlap (the overlapped last product is "
                    "already issued with the next item's first)")
    if c.diag and (not isinstance(c.diag, int) or c.diag < 0 or c.diag > 7 or c.overlap):
        raise _fail(f"config diag (a benchmark's diagnostic) takes bits 1, 2, 4 and no overlap, got {c.diag!r}")
    if c.early_lse and c.overlap:
        raise _fail("config early_lse and overlap: overlap stores an item's lse before its deferred last P V "
                    "already; take one")
    if c.s1_ahead and c.overlap:
        raise _fail("config s1_ahead and overlap both issue a product with an item's first S = Q K^T; take one")
    if c.exp_fma < 0 or c.exp_fma == 1:
        raise _fail(f"config exp_fma must be 0 (off) or at least 2, got {c.exp_fma}")
    if fp8 and c.prefetch:
        raise _fail("config prefetch is not supported with fp8 inputs")
    if c.tma_store and varlen and c.o_parts == 2:
        raise _fail("config tma_store for varlen takes tiles up to 128 wide (one O accumulator: the rows past a "
                    "sequence's end are stored by pointers, which the two 128-column halves do not have)")

    q, k, v = (_tma_ready(t) for t in (q, k, v))
    if varlen:       # [total, H, D] seen as (1, H, total, D): a sequence is a row range of batch 0
        q4, k4, v4 = (t.permute(1, 0, 2).unsqueeze(0) for t in (q, k, v))
        o4 = o.permute(1, 0, 2).unsqueeze(0)
        stride_lb, stride_lh = 0, lse.stride(0)
        cu_q, cu_k = cu_seqlens_q, cu_seqlens_k
    else:
        q4, k4, v4, o4 = q, k, v, o
        stride_lb, stride_lh = lse.stride(0), lse.stride(1)
        cu_q = cu_k = None
    if (Sq + c.block_m) * o4.stride(2) + D > _INT32_MAX:
        raise _fail(f"a sequence of {Sq} rows with a row stride of {o4.stride(2)} elements overflows the kernel's "
                    f"32-bit row offsets")
    cu_v = None
    if fp8:     # 128-byte boxes of Q and K (64 at D = 64), Vᵀ as one [head_dim, block_n] box per block
        box = 128 if c.head_dim >= 128 else 64
        if varlen:
            vt4, cu_v = transposed_v_varlen(v, cu_k)
        else:
            vt4 = transposed_v(v4)
        descs = [_descriptor(q4, 64, box), _descriptor(k4, c.block_n, box),
                 _descriptor(vt4, c.head_dim, c.block_n)]
        descale = descale_table(descales, B, Hkv, q.device)
    else:
        descs = [_descriptor(q4, 64), _descriptor(k4, c.block_n), _descriptor(v4, c.block_n)]
        descale = None
    descs.append(_descriptor(o4, 64) if c.tma_store else None)
    num_m = -(-Sq // c.block_m)
    n_programs = _programs(q.device, programs)
    if varlen and order == "sorted":
        sched = device_sorted_schedule(cu_q, cu_k, total_q, total_k, Sq, num_m, H, c.block_m, causal, n_programs,
                                       group_h)
    elif varlen:
        sched = _table_on(q.device, snake_schedule, num_m, B * H, causal, n_programs, group_h)
    else:
        sched = _table_on(q.device, schedule, Sq, Sk, B * H, c.block_m, c.block_n, causal, n_programs, group_h,
                          (win_left, win_right))
    if trace is not None:
        want = trace_shape(c, sched.shape[0], trace.shape[2] if trace.dim() == 4 else 1)
        if trace.dtype != torch.int64 or tuple(trace.shape) != want or not trace.is_contiguous() or \
                trace.device != q.device:
            raise _fail(f"'trace' must be a contiguous int64 tensor of shape {want} (programs, consumers + 1, "
                        f"items, stages) on {q.device}, got {trace.dtype} {tuple(trace.shape)} on {trace.device}")
    fp8_meta = {"FP8": fp8, "O_DTYPE": DTYPES[o_dtype] if fp8 else None, "DESCALE": descale is not None,
                "EXP_FMA": c.exp_fma, "SKEW": c.skew, "O_ALIGN": stride_align(o4), "DIAG": c.diag,
                "S1_AHEAD": c.issues_s1_ahead(causal, varlen, win_left >= 0 or win_right >= 0, Sk),
                "K_AHEAD": c.k_ahead, "EARLY_LSE": c.early_lse}
    _launch((sched.shape[0],), *descs, o4, lse, cu_q, cu_k, cu_v, descale, Sq, Sk, H, H // Hkv, num_m, sm_scale * LOG2E,
            o4.stride(0), o4.stride(1), o4.stride(2), stride_lb, stride_lh, sched, sched.shape[1], trace,
            TRACE=0 if trace is None else trace.shape[2],
            D_REAL=D, HEAD_DIM=c.head_dim, BLOCK_M=c.block_m, BLOCK_N=c.block_n, NUM_STAGES=c.stages,
            Q_BUFS=c.q_bufs, CAUSAL=causal, VARLEN=varlen, DTYPE={**DTYPES, **FP8_DTYPES}[q.dtype], REGISTERS=c.registers,
            OVERLAP=c.overlap, PREFETCH=c.prefetch, O_TMA=c.tma_store, O_PARTS=c.o_parts,
            DIAG_SKIP=c.skips_diagonal(causal), PIN_SOFTMAX=c.pin_softmax, WIN_LEFT=win_left, WIN_RIGHT=win_right,
            SOFTCAP=cap, num_warps=4, **fp8_meta)
    return o, lse


def trace_shape(config: AttnConfig, programs: int, items: int) -> tuple[int, int, int, int]:
    """The shape of ``attention_forward``'s ``trace`` tensor: per program, a row per consumer and
    one for the producer, ``items`` items of ``TRACE_STAGES`` cycle counts."""
    return (programs, config.block_m // 64 + 1, items, TRACE_STAGES)


def compile_config(q, k, v, **kwargs) -> list:
    """Compile (for sm_90a, without launching) the kernel ``attention_forward(q, k, v,
    **kwargs)`` would launch on an H200 (``programs`` defaults to its 132 SMs: the schedule's
    width is an argument that specializes the kernel); returns the compiled-kernel handles
    (``.n_regs``, ``.n_spills``, ``.metadata.shared``).  CPU tensors of the real shapes fill
    the disk cache for the GPU launch."""
    kwargs.setdefault("programs", H200_SMS)
    return _COMPILE_ONLY.collect(attention_forward, q, k, v, **kwargs)


def reference(q, k, v, *, causal=False, sm_scale=None, cu_seqlens_q=None, cu_seqlens_k=None, dtype=torch.float64,
              window=None, softcap=None):
    """``(o, lse)`` in ``dtype`` (float64 by default) by plain tensor math, same layouts and
    semantics (top-left causal, GQA, varlen, sliding windows, softcapping; rows without keys:
    o = 0, lse = -inf)."""
    D = q.shape[-1]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale

    def dense(q, k, v):          # [B, H, Sq, D], [B, Hkv, Sk, D]
        group = q.shape[1] // k.shape[1]
        k = k.to(dtype).repeat_interleave(group, 1)
        v = v.to(dtype).repeat_interleave(group, 1)
        s = (q.to(dtype) @ k.transpose(-1, -2)) * sm_scale
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        Sq, Sk = s.shape[-2:]
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        hidden = torch.zeros(Sq, Sk, dtype=torch.bool, device=q.device)
        if causal:
            hidden |= j > i
        if window is not None and window[0] >= 0:
            hidden |= j < i - window[0]
        if window is not None and window[1] >= 0:
            hidden |= j > i + window[1]
        s = s.masked_fill(hidden, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        return p @ v, lse

    if cu_seqlens_q is None:
        return dense(q, k, v)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    o = torch.zeros(q.shape, dtype=dtype, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=dtype, device=q.device)
    for b in range(len(cq) - 1):
        if cq[b + 1] == cq[b]:
            continue
        ob, lb = dense(*(t[lo:hi].transpose(0, 1)[None] for t, lo, hi in
                         ((q, cq[b], cq[b + 1]), (k, ck[b], ck[b + 1]), (v, ck[b], ck[b + 1]))))
        o[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)
        lse[:, cq[b]:cq[b + 1]] = lb[0]
    return o, lse
