"""The configurations of ``tlxc.ops.matmul`` and the shape-aware choice among them.

Everything the choice depends on is data in this file:

- ``CONFIGS``: every configuration by name (kernel family, tile, stages, persistence,
  cluster, split-K, operand swap);
- ``MEASURED``: the best configuration per measured shape, as printed by
  ``python bench/ops_matmul_bench.py --table`` on the H200 (paste its output over the
  list); the rows shipped first are **predictions** (``"source": "predicted"``), to be
  replaced by measurements;
- ``choose_config``: the heuristic (docs/ops.md).  A problem takes the configuration of the
  nearest measured shape of its kind (distance in log2 of M, N and K) when that
  configuration can run it (layout, alignment, dtype); otherwise the rules of
  ``rule_based`` decide.

A configuration is valid for a problem when ``supports(config, problem)`` says so (the WS
kernel reads operands TMA cannot describe -- rows not 16-byte aligned, a strided view --
from 16-byte-aligned copies the host makes first ("staging", ``Problem.stage_bytes``), and
stores an output TMA cannot describe through pointers; fp8 needs K-major operands, ...);
``candidates(problem)`` lists the valid ones, the set the bench and the autotuner time.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GemmConfig:
    """One configuration.  ``kernel``: ``"ws"`` (kernels/gemm_ws.py, warp-specialized TMA),
    ``"dot"`` (kernels/gemm_dot.py, pointer loads and ``tl.dot``) or ``"gemv"``
    (kernels/gemv.py, M = 1 on CUDA cores: ``bn`` columns per program, ``bk`` per step)."""
    name: str
    kernel: str
    bm: int
    bn: int
    bk: int
    stages: int
    group_m: int = 8
    persistent: bool = True       # ws: one program per SM walking tiles; else one per tile
    cluster_m: int = 1            # ws: CTA pairs sharing B by multicast
    subtile: int = 2              # ws: epilogue column slices
    warps: int = 4                # dot: warps per program
    split_k: int = 1              # dot: K split over program_id(1), partials reduced after
    swap: bool = False            # compute C^T = B^T A^T (dot: small M becomes the tile's N; ws: the tile's
    #                               ``bn`` covers M, so its rows (bn = 160: 128 + a 32 tail) can fit M)
    fp8: bool = False             # ws: the fp8 kernel (BK 128 bytes wide); dot: fp8 operands only (others run fp8 too)
    consumers: int = 2            # ws: consumer warp groups, BM / consumers rows each (3 for BM = 192)
    unroll: int = 1               # gemv: K steps unrolled (their loads issued together)
    stream_k: bool = False        # ws: one program per SM, each an equal share of all tiles' k-steps
    cluster_split: bool = False   # dot: a tile's splits are one cluster, summed in rank 0's shared memory
    share_a: bool = False         # ws: the CTA pair's tiles sit side by side and share A (else stacked, sharing B)
    ksplit: bool = False          # ws: both consumers on the tile's 64 rows, alternate k-steps, sums added at its end

    @property
    def sub_m(self) -> int:
        """ws: the rows each consumer's accumulator holds (``bm / consumers``; ``ksplit``: all ``bm``)."""
        return self.bm if self.ksplit else self.bm // self.consumers

    def describe(self) -> str:
        what = f"{self.kernel} {self.bm}x{self.bn}x{self.bk} {self.stages} stages"
        if self.kernel == "ws":
            what += f", {'persistent' if self.persistent else 'one tile per program'}"
            what += f", cluster {self.cluster_m}{' sharing A' if self.share_a else ''}, subtile {self.subtile}, " \
                f"{self.consumers} consumers"
            what += ", stream-K" if self.stream_k else ""
            what += ", consumers on alternate k-steps" if self.ksplit else ""
        elif self.kernel == "gemv":
            what += f", {self.warps} warps, one row of A, no tensor cores"
        else:
            what += f", {self.warps} warps, split-K {self.split_k}" + (", swapped (C^T)" if self.swap else "")
        return what


def split_columns(bn: int) -> tuple[int, int]:
    """A WS tile's ``bn`` columns as (main, tail): block shapes are powers of two, so a tile
    between two of them (80 = 64 + 16, 192 = 128 + 64) is a main part and a narrower
    power-of-two tail, each with its own B box, wgmma and C store; (bn, 0) for a power of two.
    The tail of a three-part tile (``tail_parts``: 152 = 128 + 16 + 8) is its two tails' sum."""
    main = 1 << (bn.bit_length() - 1)
    return main, bn - main


def tail_parts(bn: int) -> tuple[int, int, int]:
    """A WS tile's ``bn`` columns as (main, tail, second tail), each a power of two or 0:
    152 = 128 + 16 + 8 (cuBLAS's swapped tile for odd token counts: 297 rows in two, 1213 in
    eight); the parts' products on a K-major B are one m64n152 (``passes/dot_pairs.py``)."""
    main, rest = split_columns(bn)
    tail = 1 << (rest.bit_length() - 1) if rest else 0
    return main, tail, rest - tail


def _ws(bm, bn, stages, **kw):
    fp8 = kw.get("fp8", False)
    main, tail, tail2 = tail_parts(bn)
    assert not tail or (tail >= 16 and main >= 64 and not kw.get("stream_k") and kw.get("subtile", 2) == 1), \
        "a tile tail: a power of two of at least 16 columns after a main part of at least 64 (one B box), " \
        "no stream-K, subtile 1"
    assert not tail2 or (tail2 & (tail2 - 1) == 0 and tail2 >= 8 and kw.get("swap")), \
        "a second tile tail: a power of two of at least 8 columns, swapped tiles only (pointer stores)"
    bk = 128 if fp8 else 64
    parts = [f"ws{'8' if fp8 else ''}_{bm}x{bn}x{bk}_s{stages}"]
    if not kw.get("persistent", True):
        parts.append("np")
    if kw.get("cluster_m", 1) > 1:
        parts.append(f"c{kw['cluster_m']}" + ("a" if kw.get("share_a") else ""))
    assert not kw.get("share_a") or (kw.get("cluster_m", 1) == 2 and not kw.get("stream_k")), \
        "share_a: a pair (cluster_m=2) of whole tiles"
    if kw.get("subtile", 2) != 2 and not kw.get("swap"):      # (a swapped tile stores in chunks of its own)
        parts.append(f"sub{kw['subtile']}")
    if kw.get("swap"):
        assert (kw.get("cluster_m", 1) == 1 or kw.get("share_a")) and not kw.get("stream_k") and not fp8 and \
            bm in (128, 256), \
            "a swapped WS tile: no stacked pair (a pair side by side shares the weights), no stream-K, 16-bit, " \
            "64 or 128 of N per consumer"
        parts.append("swap")
    if kw.get("stream_k"):
        assert kw.get("cluster_m", 1) == 1 and kw.get("persistent", True) and bm == 128 and \
            (bn <= 128 or (bn == 256 and kw.get("subtile", 2) == 2)), \
            "stream-K: persistent, no cluster, two consumers whose accumulator and a loaded partial fit " \
            "(256-wide tiles: fixed up in 64-column quarters)"
        parts.append("sk")
    if kw.get("ksplit"):
        assert bm == 64 and (kw.get("cluster_m", 1) == 1 or kw.get("share_a")) and not kw.get("stream_k") and \
            not tail and not kw.get("swap"), \
            "ksplit: a 64-row tile (both consumers on its rows), no stream-K, tail or swap; a pair shares A only"
        parts.append("ks")
    # a consumer owns 64 or 128 rows (wgmma's M is 64): 192-row tiles take three consumers
    return GemmConfig("_".join(parts), "ws", bm, bn, bk, stages, consumers=3 if bm == 192 else 2, **kw)


def consumer_registers(consumers: int) -> int:
    """The setmaxnreg budget of each consumer warp group of the WS kernel: the 65536
    registers of an SM less the producer warp group's (at least 24 per thread), shared by the
    consumers' 128 threads each, in multiples of 8 (two consumers: 232; three: 160, room for
    a 64x128 float32 accumulator's 64)."""
    return min(232, (65536 - 128 * 24) // (128 * consumers) // 8 * 8)


def _dot(bm, bn, bk, stages, warps, split_k=1, swap=False, fp8=False, cluster_split=False):
    name = f"{'swap' if swap else 'dot'}{'8' if fp8 else ''}_{bm}x{bn}x{bk}_s{stages}_w{warps}" + \
        (f"_k{split_k}" if split_k > 1 else "") + ("c" if cluster_split else "")
    assert not cluster_split or 2 <= split_k <= 8, "a cluster holds 2-8 CTAs (portable size)"
    return GemmConfig(name, "dot", bm, bn, bk, stages, warps=warps, split_k=split_k, swap=swap, fp8=fp8,
                      cluster_split=cluster_split)


def _gemv(bn, bk, stages, warps, unroll=1):
    name = f"gemv_{bn}x{bk}_s{stages}_w{warps}" + (f"_u{unroll}" if unroll > 1 else "")
    return GemmConfig(name, "gemv", 1, bn, bk, stages, warps=warps, unroll=unroll)


_ALL = [
    # warp-specialized TMA kernel (bf16/fp16): the big-shape workhorses
    _ws(128, 256, 4),                              # examples/hopper_gemm_ws.py's measured best
    _ws(128, 256, 3, subtile=1),
    _ws(128, 256, 4, cluster_m=2),
    # the pair with a whole-tile C buffer: one TMA store a tile, no wait for the first half's
    # store to read its buffer before the second half is written (short K: the epilogue shows)
    _ws(128, 256, 3, cluster_m=2, subtile=1),
    _ws(128, 128, 5),
    _ws(128, 128, 4, persistent=False),
    _ws(128, 128, 5, cluster_m=2),
    _ws(128, 256, 4, persistent=False),
    # 192x128 tiles (three consumers): fuller last waves where 128x128 / 128x256 leave one
    # mostly empty (3072^3: 2.91 waves against 4.36 / 2.18; 5000x3000x2000: 4.91 against 3.64)
    _ws(192, 128, 5),
    _ws(192, 128, 5, cluster_m=2),
    # 128x64 tiles, one per program: twice the CTAs of 128x128 on small squares (1024^3: 128)
    _ws(128, 64, 4, persistent=False, subtile=1),
    # small problems, one tile per SM: every k-step's load latency is exposed unless the ring
    # holds more of K (Little's law: 64x128 steps at the MMA rate need ~100 KB in flight)
    _ws(128, 64, 8, persistent=False, subtile=1),
    _ws(128, 64, 4, persistent=False, cluster_m=2, subtile=1),   # pairs share B: 20 KB from L2 per step, not 24
    _ws(128, 128, 6, persistent=False),
    # stream-K: fewer tiles than SMs (1000x1240x776: 80 tiles of 128x128 for 132 SMs) -- every
    # SM gets 1/132 of all k-steps; a tile split between programs is summed by its last one
    _ws(128, 128, 4, stream_k=True),
    # ... with 256-wide tiles (the partials fixed up in 64-column quarters, three stages: the scratch
    # tiles of the conversions take the fourth's room): odd M against a wide N, where
    # whole 128x256 tiles leave most of a last round idle (297x14336: 168 tiles = 1.27 rounds)
    _ws(128, 256, 3, stream_k=True),
    # swapped (C^T = B^T A^T, stored through pointers): 256 of N x 144 / 160 of M, two consumers of
    # 128 N-rows each -- the tiles cuBLAS runs odd token counts with (nvjet 256x152 at 297x14336x4096:
    # 112 CTAs, one round; H200 2026-12-04), whose M side fits M where 64-row multiples do not
    # (256x192 spills under an activation's epilogue: not kept)
    _ws(256, 144, 4, swap=True, subtile=1),
    _ws(256, 160, 4, swap=True, subtile=1),
    _ws(256, 152, 4, swap=True, subtile=1),      # 128 + 16 + 8: cuBLAS's width (one m64n152 a slice)
    # ... in pairs side by side sharing the kernel's A (the weights, b^T: 32 KB a k-step of the tile's 51)
    # by multicast: 35 KB a CTA and k-step from L2 instead of 51 (cuBLAS runs 297x14336x4096 in 4x2
    # clusters, 1213x4096x4096 in 1x2; session 39)
    _ws(256, 152, 4, swap=True, subtile=1, cluster_m=2, share_a=True),
    _ws(256, 160, 4, swap=True, subtile=1, cluster_m=2, share_a=True),
    # ... and 128 of N (64 a consumer) x 144 / 152 / 160 of M at six stages: twice the tiles of the 256-row
    # ones, so M near 600 (four 152-wide tiles) fills a round with 128 tiles where 256-row tiles leave half
    # the SMs idle and 192x128 pads 600 rows to 768 (session 39)
    _ws(128, 144, 6, swap=True, subtile=1),
    _ws(128, 152, 6, swap=True, subtile=1),
    _ws(128, 160, 6, swap=True, subtile=1),
    # tiles between powers of two (a main part and a tail, each its own wgmma): tile counts that
    # fit one round where 128x128 leaves SMs idle and 128x64 needs two rounds -- cuBLAS runs
    # 1000x1240x776 as 128 tiles of 80 columns (nvjet 80x128, H200 2026-12-04); 128x80 = 128
    # tiles there, 128x96 = 104; 128x192 tiles fill the rounds of 5000x3000x2000 (640 = 4.85)
    _ws(128, 80, 6, subtile=1),
    _ws(128, 80, 6, persistent=False, subtile=1),
    _ws(128, 96, 6, subtile=1),
    _ws(128, 192, 4, subtile=1),
    # ... in pairs sharing B by multicast: L2 -> SM bytes a k-step 21.5 KB a CTA instead of 26.6
    # (1000x1240x776 reads ~40 MB from L2 in ~5 us); 0.86-0.88x there (unpaired 0.85)
    _ws(128, 80, 6, cluster_m=2, subtile=1),
    # ... or side by side sharing A, the wider operand of these tiles: 18 KB a CTA and k-step
    # from L2 instead of 26.6 (cuBLAS's 2x1 clusters at 1000x1240x776): 0.85 -> 0.92x there,
    # but 1.02 -> 0.92x at K = 3104 (H200 2026-12-04); 128x128 / 128x96 / 128x64 pairs sharing
    # A ran 5-13% slower than unpaired (not kept)
    _ws(128, 80, 6, cluster_m=2, share_a=True, subtile=1),
    # fp8 (e4m3/e5m2, K-major operands, BK = 128)
    _ws(128, 256, 3, fp8=True),
    # ... with a fourth stage (224 KB: the C half-tiles beside the ring, as bf16's 128x256 s4), and in
    # 2x1 clusters (bf16's best tile at large M); session 34: within 1 % of _s3 on the H200 (session 35),
    # so no measured row picks them
    _ws(128, 256, 4, fp8=True),
    _ws(128, 256, 3, fp8=True, cluster_m=2),
    _ws(128, 128, 4, fp8=True),
    _ws(128, 128, 4, fp8=True, persistent=False),
    _ws(128, 64, 6, fp8=True, persistent=False, subtile=1),     # fp8 with few tiles (1024^3: 128 of them)
    # fp8 against a short M (M = 128, K = 4096: B streams from HBM once, A from L2 by every program):
    # 128 x 32 tiles cover M in one tile (B read once, by TMA), pairs side by side share A by multicast,
    # so a program moves 256 KB of A and 128 KB of B, where 64 x 64 pointer tiles move 256 + 256 KB
    _ws(128, 32, 8, fp8=True, persistent=False, cluster_m=2, share_a=True, subtile=1),
    _ws(128, 32, 10, fp8=True, persistent=False, subtile=1),
    # ... and 1024^3 (128 tiles of 128 x 64): pairs sharing A
    _ws(128, 64, 6, fp8=True, persistent=False, cluster_m=2, share_a=True, subtile=1),
    # short M on 64-row tiles with a deep ring (cuBLAS's nvjet_sm90_tst_64x32_64x16 at M = 64 and
    # qqtst_64x64_128x13 at fp8 M = 128, session 33): both consumers on the tile's rows, alternate
    # k-steps (`ksplit`); measured slower than the picks (H200 2026-12-06: bf16 0.54-0.96, fp8 0.64-0.91 of
    # cuBLAS against 0.93-1.07; docs/performance.md, session 34), so no heuristic row picks them
    _ws(64, 32, 16, persistent=False, subtile=1, ksplit=True),
    _ws(64, 64, 11, persistent=False, ksplit=True),
    _ws(64, 64, 11, fp8=True, persistent=False, ksplit=True),
    # ... in pairs side by side sharing A by multicast (cuBLAS's 1x2 clusters): A's L2 -> SM bytes halved
    _ws(64, 32, 16, persistent=False, subtile=1, ksplit=True, cluster_m=2, share_a=True),
    _ws(64, 64, 11, fp8=True, persistent=False, ksplit=True, cluster_m=2, share_a=True),
    # fp8, few tiles (M = 128, 1024^3): 64-row pointer tiles, 128 bytes of K a step, split-K
    _dot(64, 128, 128, 4, 4, fp8=True),
    _dot(64, 128, 128, 4, 4, split_k=2, fp8=True),
    _dot(64, 128, 128, 4, 4, split_k=4, fp8=True),
    # fp8 M = 128 against K = 4096: 64x64 tiles, 128 programs, no split, 40-48 KB of B in flight each
    _dot(64, 64, 128, 6, 4, fp8=True),
    _dot(64, 64, 256, 4, 4, fp8=True),
    # pointer kernel on tl.dot: anything TMA cannot describe, and mid sizes
    _dot(128, 256, 64, 3, 8),
    _dot(128, 128, 64, 3, 4),
    _dot(64, 128, 64, 4, 4),
    _dot(64, 128, 64, 6, 4),         # small squares: deeper ring (more of K in flight)
    _dot(64, 128, 128, 3, 4),        # small squares: half the k-steps (fewer waits per tile)
    _dot(64, 64, 64, 4, 4),          # small squares: twice the programs of 64x128
    # split-K (small M*N, large K)
    _dot(128, 128, 64, 3, 4, split_k=2),
    _dot(128, 128, 64, 3, 4, split_k=4),
    _dot(64, 128, 64, 4, 4, split_k=4),
    _dot(64, 128, 64, 4, 4, split_k=8),
    # M = 64-128 with K >= 4096: 256 programs (two per SM) reading B once
    _dot(128, 64, 64, 4, 4, split_k=2),
    _dot(128, 64, 64, 4, 4, split_k=4),
    _dot(64, 64, 64, 4, 4, split_k=4),
    # M = 64-128 against a long K, no split: 64-row tiles, 128 elements of K a step, so that one
    # program per SM keeps 48-80 KB of B in flight (the rate of a single SM is about the bytes
    # in flight per ~1 us of loaded latency; BK = 64 rings hold half that) and no split-K tail
    _dot(64, 64, 128, 3, 4),               # 96 KB: two programs an SM where there are more than 132
    _dot(64, 64, 128, 4, 4),
    _dot(64, 64, 128, 5, 4),
    _dot(64, 64, 128, 6, 4),
    _dot(128, 64, 128, 4, 4),
    _dot(64, 64, 64, 6, 4, split_k=4),     # the k4 pick with a deeper ring (two programs an SM still)
    _dot(64, 32, 256, 4, 4),               # M = 64: 128 programs (every SM), 48 KB of B in flight, no split
    _dot(64, 32, 128, 8, 4),
    _dot(128, 128, 128, 3, 8, split_k=4),  # M = 128: A read once per 128 columns (half the L2 traffic of 64-wide tiles)
    # M = 64 against K = 4096 (session 14, measured non-default first): 64x64 tiles split in two,
    # 128 programs (one per SM, no second program to share the SM), each streaming half of K of
    # 64 rows of B with 48-96 KB of B in flight (the no-split 64x64x128_s4 read B at ~37 GB/s per
    # SM on 64 SMs); a two-way split-K hand-over is half the k4 one's partials
    _dot(64, 64, 128, 4, 4, split_k=2),
    _dot(64, 64, 128, 5, 4, split_k=2),
    _dot(64, 64, 128, 6, 4, split_k=2),
    _dot(64, 64, 64, 8, 4, split_k=2),
    _dot(64, 64, 256, 3, 4, split_k=2),
    _dot(64, 64, 128, 3, 4, split_k=4),    # 256 programs, two an SM (96 KB each): 32-64 KB of B in flight an SM
    # the same with 128-wide tiles split in four (128 programs): B's rows read 256 bytes at a time
    # (N-major B: a row of a [K, N] B is N-contiguous, 128-byte pieces of it are half a DRAM burst pair)
    _dot(64, 128, 128, 4, 4, split_k=4),
    # 1024^3 / 1000x1240x776: 64x128 tiles split in two (256 programs, two per SM)
    _dot(64, 128, 64, 4, 4, split_k=2),
    # 1024^3: L2 -> SM bytes bound the 128x64 one-tile-an-SM pick (128 x 384 KB = 48 MB at ~8.5 TB/s);
    # 128x128 tiles split in two read 128 x 256 KB = 32 MB on 128 SMs (two warp groups of 64 rows)
    _dot(128, 128, 64, 3, 8, split_k=2),
    _dot(128, 128, 64, 4, 8, split_k=2),
    # split-K whose splits are one cluster: partials summed through distributed shared memory
    _dot(64, 64, 64, 3, 4, split_k=4, cluster_split=True),
    _dot(64, 64, 128, 3, 4, split_k=2, cluster_split=True),
    _dot(64, 64, 128, 4, 4, split_k=2, cluster_split=True),
    _dot(128, 64, 64, 3, 4, split_k=2, cluster_split=True),
    # small M (decode): C^T = B^T A^T, the tile's N covers M
    _dot(64, 16, 128, 4, 4, swap=True),
    _dot(64, 16, 128, 4, 4, split_k=4, swap=True),
    _dot(128, 16, 128, 4, 4, split_k=2, swap=True),
    _dot(128, 32, 64, 4, 4, swap=True),
    _dot(128, 64, 64, 4, 4, swap=True),
    _dot(128, 64, 64, 4, 4, split_k=4, swap=True),
    _dot(64, 64, 64, 4, 4, split_k=4, swap=True),
    # M = 1 (decode): no tensor cores, no split-K; [bn, bk] slices of B straight into registers
    _gemv(8, 512, 1, 4),          # 8 rows of w x 1 KB per step, 64 bytes a thread, no prefetch
    _gemv(8, 512, 1, 4, unroll=2),
    _gemv(8, 512, 1, 4, unroll=4),
    _gemv(16, 512, 1, 4),
    _gemv(8, 512, 2, 8),          # 8 warps: 32 bytes a thread, the next step's loads in flight
]
CONFIGS: dict[str, GemmConfig] = {c.name: c for c in _ALL}
assert len(CONFIGS) == len(_ALL), "configuration names must be unique"

SHARED_LIMIT = 232448          # bytes of dynamic shared memory per block on sm_90


@dataclass(frozen=True)
class Problem:
    """What the choice depends on.  ``a_kmajor``: A's K stride is 1 (else its M stride is);
    ``b_kmajor``: B's K stride is 1 (``w.t()``); ``tma_a``/``tma_b``/``tma_c``: the operand
    (in its major-ness) and the output can be TMA descriptors; ``elt``/``out_elt``: bytes
    per element of the operands and the output; ``fp8``: 8-bit operands; ``glu``: a GLU activation
    pairs the product's columns (the output has half of them)."""
    M: int
    N: int
    K: int
    elt: int = 2
    out_elt: int = 2
    a_kmajor: bool = True
    b_kmajor: bool = False
    tma_a: bool = True
    tma_b: bool = True
    tma_c: bool = True
    fp8: bool = False
    sms: int = 132
    card: str = ""                # "H100": that card's measured rows come first (``MEASURED_BY_CARD``)
    promote: bool = False         # fp8 with use_fast_accum=False: partial sums added in float32 every k-step
    residual: bool = False        # the epilogue adds a residual tile (costs shared memory in the WS kernel)
    glu: bool = False
    epilogue: tuple = field(default=(), compare=False)

    @property
    def c_tma(self) -> bool:
        """The kernels store their C tile by TMA (``C_TMA``): the output is a TMA target and no GLU pairs
        halve the tile's columns (those store through pointers; a swapped tile's by ``C_TRANS``)."""
        return self.tma_c and not self.glu

    @property
    def kind(self) -> str:
        """The measured table's key besides the shape."""
        return ("fp8" if self.fp8 else "16") + ("_bk" if self.b_kmajor else "_bn")

    @property
    def inner_a(self) -> int:
        """A's contiguous extent (K for a K-major A, else M): a TMA row."""
        return self.K if self.a_kmajor else self.M

    @property
    def inner_b(self) -> int:
        return self.K if self.b_kmajor else self.N

    @property
    def stage_bytes(self) -> int:
        """Bytes of the operands the WS kernel reads from aligned copies (0: both TMA-ready)."""
        return ((0 if self.tma_a else self.M * self.K) + (0 if self.tma_b else self.K * self.N)) * self.elt


# Staging model (bf16, H200): a copy costs a launch plus its bytes read and written at a
# strided-copy rate; the pointer kernel on rows that are not 16-byte aligned loads element
# by element (4095x4097x4093: 0.36x cuBLAS, ~250 TFLOP/s), the WS kernel runs at ~600.
STAGE_COPY_US = 4.0
STAGE_COPY_BYTES_PER_US = 2.5e6          # 2.5 TB/s, counting the read and the write
UNALIGNED_POINTER_FLOPS_PER_US = 250e6
WS_FLOPS_PER_US = 600e6


def staging_pays(p: Problem) -> bool:
    """Is the WS kernel on staged (copied, aligned) operands predicted faster than the
    pointer kernel on the operands as they are?  True when nothing needs staging."""
    if p.stage_bytes == 0:
        return True
    copies = (not p.tma_a) + (not p.tma_b)
    stage_us = copies * STAGE_COPY_US + 2 * p.stage_bytes / STAGE_COPY_BYTES_PER_US
    flops = 2 * p.M * p.N * p.K
    return flops / WS_FLOPS_PER_US + stage_us < flops / UNALIGNED_POINTER_FLOPS_PER_US


def ws_shared_bytes(c: GemmConfig, elt: int, out_elt: int, residual: bool = False, c_tma: bool = True,
                    glu: bool = False) -> int:
    """Shared memory of the WS kernel: the stages, the consumers' C tiles, barriers and
    the epilogue's vectors; a residual tile is loaded in its own layout and converted to the
    accumulator's through a float32 scratch per consumer (measured with compile_config:
    ws_128x256x64_s4 229440 bytes, 230464 with a bias, 294976 with a residual)."""
    stage = (c.bm * c.bk + c.bk * c.bn) * elt
    sub_m = c.sub_m
    half_tile = sub_m * (c.bn // c.subtile)
    scratch = c.consumers * half_tile * 4 if residual else 0
    if not c_tma:                    # pointer stores: a stub
        c_tiles = c.consumers * sub_m * 8 * out_elt
    elif c.swap and glu:             # ... GLU pairs: one [16, sub_m / 2] chunk and the pairs' float32 exchange
        c_tiles = c.consumers * (16 * sub_m // 2 * out_elt + sub_m * 16 * 4)
    elif c.swap:                     # C^T's tile staged as out's rows: two [16, sub_m] chunks a consumer
        c_tiles = c.consumers * 2 * 16 * sub_m * out_elt
    else:
        c_tiles = c.consumers * half_tile * out_elt
    # stream-K: a partial goes to and comes from global memory in a blocked layout, converted
    # from / to the accumulator's through a float32 scratch tile per consumer (256-wide tiles:
    # of a 64-column quarter)
    scratch += c.consumers * sub_m * (c.bn // 4 if c.bn > 128 else c.bn) * 4 if c.stream_k else 0
    # ksplit: consumer 1's float32 sum, handed to consumer 0, and the scratch its load converts through
    scratch += 2 * sub_m * c.bn * 4 if c.ksplit else 0
    return c.stages * stage + c_tiles + 2 * 8 * c.stages + 1024 + scratch


PROMOTE_ACC_REGISTERS = 64        # pointer kernel: accumulator registers a thread may hold for a promoted fp8 sum (x2)
PROMOTE_WS_SPARE = 40             # WS consumer: registers besides the promoted sum and part (addresses, loop state)


def accumulator_registers(c: GemmConfig) -> int:
    """Float32 accumulator registers of one thread of ``c``'s MMA warps (ws: a consumer's
    ``bm / consumers`` rows over 128 threads; dot: the tile over the program's threads)."""
    if c.kernel == "ws":
        return c.sub_m * c.bn // 128
    return c.bm * c.bn // (32 * c.warps)


def promoted_registers(c: GemmConfig) -> int:
    """Float32 registers a thread of ``c``'s MMA warps holds with ``use_fast_accum=False``: the sum
    and the part each k-step's products go to first -- on the WS kernel, tiles wider than 128
    columns multiply each k-step in two 128-column halves (``PROMOTE_HALVES``), so the part is
    half the sum's size."""
    acc = accumulator_registers(c)
    return acc + (acc // 2 if c.kernel == "ws" and c.bn > 128 else acc)


def promote_limit(c: GemmConfig) -> int:
    """The most ``promoted_registers`` ``c`` may hold: a WS consumer's setmaxnreg budget less
    ``PROMOTE_WS_SPARE`` (two consumers: 232 - 40 = 192, a 64x256 sum and a 64x128 part), and
    never less than two 64-register accumulators (the pointer kernel's limit, 0 spills measured)."""
    if c.kernel == "ws":
        return max(2 * PROMOTE_ACC_REGISTERS, consumer_registers(c.consumers) - PROMOTE_WS_SPARE)
    return 2 * PROMOTE_ACC_REGISTERS


def supports(c: GemmConfig, p: Problem) -> str | None:
    """None when ``c`` can run ``p``, else why not (one line)."""
    if p.promote and c.kernel == "ws" and tail_parts(c.bn)[1]:
        return "use_fast_accum=False promotes the main tile's accumulator only; tiles with column tails are refused"
    if p.promote and c.kernel != "gemv" and promoted_registers(c) > promote_limit(c):
        return (f"use_fast_accum=False keeps a second accumulator for each k-step's fp8 products: "
                f"{promoted_registers(c)} registers a thread, where {promote_limit(c)} fit")
    if c.kernel == "gemv":
        if p.M != 1:
            return "the single-row kernel runs M = 1 only"
        if p.fp8:
            return "the single-row kernel runs 16-bit operands only"
        if not p.b_kmajor:
            return "the single-row kernel reads B K-major (w.t()) only"
        if p.N * max(p.K, 1) >= 2 ** 31:
            return "32-bit offsets"
        return None
    if c.kernel == "ws":
        if c.fp8 != p.fp8:
            return "fp8 configurations run fp8 operands only, and the others 16-bit ones"
        if p.fp8 and not (p.a_kmajor and p.b_kmajor):
            return "wgmma reads 8-bit operands K-major only"
        if p.K * p.elt < 16:
            return "K is below one 16-byte TMA row"
        if min(p.inner_a, p.inner_b) * p.elt < 16:
            return "an operand's contiguous rows are below one 16-byte TMA row"
        if p.stage_bytes and p.fp8:
            return "fp8 operands must be TMA-describable (no staging copies for 8-bit operands)"
        if c.swap and not (p.tma_a and p.tma_b):
            return "the swapped WS kernel reads both operands by TMA as they are (no staging copies)"
        if tail_parts(c.bn)[2] and not (p.a_kmajor if c.swap else p.b_kmajor):
            return "a tile of three parts (e.g. 128 + 16 + 8 columns) reads its B K-major only"
        if ws_shared_bytes(c, p.elt, p.out_elt, p.residual, p.c_tma and not c.swap) > SHARED_LIMIT:
            return "shared memory: the stages, the C tiles and the epilogue's residual exceed 227 KB"
        rows, cols = (p.N, p.M) if c.swap else (p.M, p.N)      # the kernel's problem (swapped: Cᵀ = Bᵀ Aᵀ)
        if c.cluster_m > 1 and not c.share_a and rows <= c.bm:
            return "a cluster pair needs two tile rows"
        if c.share_a and cols <= c.bn:
            return "a cluster pair sharing A needs two tile columns"
        if c.swap and p.glu and not stores_transposed(c, p):    # (the pointer path's row exchange: 64 KB a consumer)
            return "GLU pairs on a swapped tile are stored by TMA only: " + \
                ("the output must be a TMA store target (16-byte rows)" if not p.tma_c else
                 "their staging does not fit beside this tile's ring in shared memory")
        if c.stream_k and c.bn > 128 and not p.c_tma:
            return "256-wide stream-K tiles store through TMA (the output is not a TMA store target)"
        if c.stream_k and -(-rows // c.bm) * -(-cols // c.bn) * -(-p.K // c.bk) * p.sms >= 2 ** 31:
            return "stream-K's k-step arithmetic needs tiles x k-steps x SMs below 2^31"
        return None
    if c.fp8 and not p.fp8:
        return "fp8 configurations run fp8 operands only"
    if p.fp8 and not (p.a_kmajor and p.b_kmajor):
        return "fp8 operands must be K-major (the wgmma/cp.async path copies others element by element)"
    M = p.N if c.swap else p.M
    if c.swap and p.M > 64:
        return "the operand swap is for small M (<= 64)"
    if c.split_k > 1:
        k_tiles = -(-p.K // c.bk)
        if k_tiles < 2 * c.split_k:
            return "too few K tiles to split"
        if c.split_k * p.M * p.N * 4 > 2 ** 29:
            return "the split-K workspace would exceed 512 MB"
        if -(-M // c.bm) * -(-(p.M if c.swap else p.N) // c.bn) >= 2 * p.sms:
            return "split-K is for problems with fewer output tiles than two per SM"
    if M * max(p.K, 1) >= 2 ** 31 or p.N * max(p.K, 1) >= 2 ** 31 or p.M * p.N >= 2 ** 31:
        return "32-bit offsets"
    return None


@functools.lru_cache(maxsize=1024)
def stores_transposed(c: GemmConfig, p: Problem) -> bool:
    """Whether swapped WS configuration ``c`` stores ``p``'s output by TMA: C^T's tile staged chunk by
    chunk as rows of the output in shared memory (``C_TRANS``), where the output is a TMA store target
    (16-byte rows; with GLU pairs, of the output's half of the columns) and the staging fits beside the
    ring; else through pointers.  Cached: every launch of a WS configuration asks it (as ``swapped``)."""
    return c.kernel == "ws" and c.swap and p.tma_c and \
        ws_shared_bytes(c, p.elt, p.out_elt, p.residual, True, p.glu) <= SHARED_LIMIT


@functools.lru_cache(maxsize=1024)
def swapped(p: Problem) -> Problem:
    """The problem of ``C^T = B^T A^T`` (a swapped configuration's kernel): M and N exchanged, A's
    facts B's and B's A's, C^T's rows contiguous, so no TMA store.  Cached: it is asked on every
    launch of a swapped configuration."""
    return dataclasses.replace(p, M=p.N, N=p.M, a_kmajor=p.b_kmajor, b_kmajor=p.a_kmajor, tma_a=p.tma_b,
                               tma_b=p.tma_a, tma_c=False)


def candidates(p: Problem) -> list[GemmConfig]:
    return [c for c in CONFIGS.values() if supports(c, p) is None]


def usable(c: GemmConfig, p: Problem) -> bool:
    """What the heuristic may pick: ``c`` can run ``p``, and a WS configuration whose
    operands need staging copies is predicted to win over the pointer kernel anyway."""
    return supports(c, p) is None and (c.kernel != "ws" or staging_pays(p))


# -- the measured table ----------------------------------------------------------------------------
# (M, N, K, kind, config name, source).  "predicted" rows are guesses from the kernels' known
# behaviour (docs/performance.md) until bench/ops_matmul_bench.py --table replaces them with
# "H200 <date>" rows.
MEASURED: list[tuple[int, int, int, str, str, str]] = [   # bench/ops_matmul_bench.py --table, NVIDIA H200, 2026-12-03
    (256, 256, 256, '16_bn', 'dot_64x64x64_s4_w4', "H200 2026-12-03 17:30 1.05x (dot_64x128x64_s4_w4 0.92x)"),
    (512, 512, 512, '16_bn', 'dot_64x64x64_s4_w4', "H200 2026-12-03 17:30 1.00x (dot_64x128x64_s4_w4 0.93x)"),
    (1024, 1024, 1024, '16_bn', 'dot_64x128x128_s3_w4', "H200 2026-12-03 17:30 0.96x (dot_64x128x64_s4_w4 0.94x)"),
    (2048, 2048, 2048, '16_bn', 'ws_128x256x64_s4_np', "H200 2026-12-03 1.00x"),
    (3072, 3072, 3072, '16_bn', 'ws_192x128x64_s5', "H200 2026-12-03 17:30 0.99x (ws_128x128x64_s5 0.87x)"),
    (4096, 4096, 4096, '16_bn', 'ws_128x256x64_s3_sub1', "H200 2026-12-03 1.00x"),
    (6144, 6144, 6144, '16_bn', 'ws_128x256x64_s3_sub1', "H200 2026-12-03 1.01x"),
    (8192, 8192, 8192, '16_bn', 'ws_128x256x64_s3_sub1', "H200 2026-12-03 1.02x"),
    (16384, 16384, 16384, '16_bn', 'ws_128x128x64_s5', "H200 2026-12-03 1.06x"),
    (1, 4096, 4096, '16_bk', 'gemv_8x512_s1_w4_u4', "H200 2026-12-03 17:30 1.47x (u2 1.44x)"),
    (1, 14336, 4096, '16_bk', 'gemv_8x512_s1_w4_u4', "H200 2026-12-03 17:30 1.06x"),
    (1, 4096, 14336, '16_bk', 'gemv_8x512_s1_w4_u2', "H200 2026-12-03 17:30 1.01x"),
    (1, 128256, 4096, '16_bk', 'gemv_8x512_s1_w4', "H200 2026-12-03 17:30 1.03x (swap_64x16x128_s4_w4 0.97x)"),
    (16, 4096, 4096, '16_bk', 'swap_64x16x128_s4_w4', "H200 2026-12-03 0.92x"),
    (16, 14336, 4096, '16_bk', 'swap_64x16x128_s4_w4', "H200 2026-12-03 1.05x"),
    (16, 4096, 14336, '16_bk', 'swap_64x16x128_s4_w4_k4', "H200 2026-12-03 0.92x"),
    (16, 128256, 4096, '16_bk', 'swap_64x16x128_s4_w4', "H200 2026-12-03 1.04x"),
    (64, 4096, 4096, '16_bk', 'dot_64x64x128_s4_w4_k2', "H200 2026-12-04 04:15 0.97x (_s5_w4_k2 0.97x, dot_64x64x64_s4_w4_k4 0.89x, DSMEM split _k4c 0.39x s13)"),
    (64, 4096, 4096, '16_bn', 'dot_64x64x256_s3_w4_k2', "H200 2026-12-04 04:15 0.93x (dot_64x64x128_s4_w4_k2 0.92x, swap_128x64x64_s4_w4_k4 0.79x)"),
    (128, 4096, 4096, '16_bn', 'dot_128x128x64_s3_w4_k4', "H200 2026-12-04 05:22 0.85x, M = 96 0.90x (dot_64x64x256_s3_w4_k2 0.77x / 0.76x; M = 32 1.03x with it)"),
    (64, 14336, 4096, '16_bk', 'dot_64x128x64_s4_w4', "H200 2026-12-03 1.03x"),
    (64, 4096, 14336, '16_bk', 'dot_64x64x64_s4_w4_k4', "H200 2026-12-03 17:30 0.99x"),
    (64, 128256, 4096, '16_bk', 'dot_64x128x64_s4_w4', "H200 2026-12-03 1.08x"),
    (128, 4096, 4096, '16_bk', 'dot_64x64x128_s6_w4', "H200 2026-12-03 20:00 1.16x (_s4 1.14x, dot_128x64x64_s4_w4_k4 1.00x)"),
    (128, 14336, 4096, '16_bk', 'ws_128x128x64_s5', "H200 2026-12-03 0.98x"),
    (128, 4096, 14336, '16_bk', 'dot_128x128x128_s3_w8_k4', "H200 2026-12-03 20:00 1.01x (dot_128x64x64_s4_w4_k4 0.97x)"),
    (128, 128256, 4096, '16_bk', 'ws_128x256x64_s3_sub1', "H200 2026-12-03 1.00x"),
    (512, 4096, 4096, '16_bk', 'ws_128x128x64_s5', "H200 2026-12-03 1.00x"),
    (512, 14336, 4096, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 1.01x"),
    (512, 4096, 14336, '16_bk', 'ws_128x128x64_s5', "H200 2026-12-03 0.99x"),
    (512, 128256, 4096, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 1.03x"),
    (2048, 4096, 4096, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 0.99x"),
    (2048, 14336, 4096, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 1.00x"),
    (2048, 4096, 14336, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 1.00x"),
    (2048, 128256, 4096, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 1.02x"),
    (8192, 4096, 4096, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 0.99x"),
    (8192, 14336, 4096, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 0.99x"),
    (8192, 4096, 14336, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 1.00x"),
    (8192, 128256, 4096, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 1.01x"),
    (5000, 3000, 2000, '16_bn', 'ws_128x256x64_s4_c2', "H200 2026-12-03 17:30 0.92x (ws_192x128x64_s5 0.82x)"),
    (4095, 4097, 4093, '16_bn', 'ws_128x256x64_s4', "predicted (staged operands): 0.65-0.85x"),
    (1000, 1240, 776, '16_bk', 'ws_128x128x64_s5', "H200 2026-12-03 17:30 0.935x (_s4_np 0.93x, stream-K 0.60x); 2026-12-04 0.90-0.92x in 10 runs (128x96 0.90-0.92x, 128x80 0.85x, 128x80 pairs sharing A 0.92x)"),
    (128, 5120, 4096, '16_bk', 'ws_128x64x64_s8_np_sub1', "H200 2026-12-04 0.90x (dot_64x64x128_s4_w4_k2 0.585x, dot_64x64x128_s6_w4 0.64x)"),
    (512, 5120, 4096, '16_bk', 'ws_192x128x64_s5', "H200 2026-12-04 0.91x (ws_128x256x64_s4 0.73x, ws_128x128x64_s5 0.71x)"),
    (1000, 1240, 1552, '16_bk', 'ws_128x96x64_s6_sub1', "H200 2026-12-04 0.98-1.04x (ws_128x128x64_s5 0.93-0.98x)"),
    (1000, 1240, 3104, '16_bk', 'ws_128x80x64_s6_sub1', "H200 2026-12-04 1.01-1.04x (ws_128x128x64_s5 0.90-0.92x)"),
    (459, 11008, 4096, '16_bk', 'ws_256x160x64_s4_swap', "H200 2026-12-05 04:42 0.91x (ws_128x192x64_s4_sub1 0.85x, ws_128x256x64_s4 0.65x)"),
    (128, 8192, 8192, '16_bn', 'ws_128x64x64_s8_np_sub1', "H200 2026-12-03 17:30 0.98x"),
    (64, 8192, 8192, '16_bn', 'dot_64x64x128_s5_w4', "H200 2026-12-03 20:00 1.06x (dot_128x128x64_s3_w4_k4 0.95x)"),
    (1024, 1024, 1024, '16_bk', 'ws_128x64x64_s8_np_sub1', "H200 2026-12-03 17:30 0.93x (dot_64x128x64_s4_w4 0.91x)"),
    (4096, 4096, 4096, '16_bk', 'ws_128x256x64_s4', "H200 2026-12-03 1.00x"),
    (8192, 8192, 8192, '16_bk', 'ws_128x256x64_s4_c2', "H200 2026-12-03 1.02x"),
    # fp8 (bench/ops_matmul_bench.py --fp8: 16:21 the heuristic only; 17:30 --table on three shapes)
    (1024, 1024, 1024, 'fp8_bk', 'dot8_64x128x128_s4_w4', "H200 2026-12-03 17:30 1.03x (ws8_128x128x128_s4 0.93x)"),
    (2048, 2048, 2048, 'fp8_bk', 'ws8_128x128x128_s4', "H200 2026-12-03 1.04x"),
    (128, 4096, 4096, 'fp8_bk', 'dot8_64x64x128_s6_w4', "H200 2026-12-03 20:00 0.99x (dot8_64x64x256_s4_w4 0.96x, ws8_128x64x128_s6_np_sub1 0.86x)"),
    (128, 14336, 4096, 'fp8_bk', 'dot8_64x128x128_s4_w4', "H200 2026-12-03 17:30 1.13x (ws8_128x128x128_s4 1.06x)"),
    # fp8, 2026-12-06 05:25 (--fp8 --configs of four WS tiles, one run): 128x256 tiles beat the rule's 128x128
    # below 8 rounds of them too (as on the H100); the fourth stage and 2x1 clusters within 1 % of _s3
    (4096, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H200 2026-12-06 1.005x (_s4 1.00x, ws8_128x128x128_s4 0.955x)"),
    (2048, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H200 2026-12-06 1.00x (_s4 1.006x, ws8_128x128x128_s4 0.968x)"),
    (8192, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H200 2026-12-06 1.002x (_s4 1.00x, ws8_128x128x128_s4 0.955x)"),
]


# Rows measured on other cards, consulted before ``MEASURED`` on that card (``Problem.card``, from
# ``card_of``): where the H100's best configuration differs from the H200's pick by more than the
# runs' spread.  ``bench/ops_matmul_bench.py --table`` on an H100 80GB HBM3, 2026-12-05, two runs
# each (the full table and a run of the heuristic or of the shape alone); fp8 against cuBLAS with
# fast accumulation (tlxc's own).  The H100's lower HBM bandwidth favours the wider tiles' reuse.
MEASURED_BY_CARD: dict[str, list[tuple[int, int, int, str, str, str]]] = {
    "H100": [
        (16384, 16384, 16384, '16_bn', 'ws_128x256x64_s3_sub1', "H100 2026-12-05 1.01-1.02x (ws_128x128x64_s5 0.70-0.94x)"),
        (16, 4096, 4096, '16_bk', 'swap_64x16x128_s4_w4_k4', "H100 2026-12-05 1.01-1.02x (swap_64x16x128_s4_w4 0.95x)"),
        (64, 4096, 4096, '16_bk', 'dot_64x64x64_s8_w4_k2', "H100 2026-12-05 1.04-1.06x (dot_64x64x128_s4_w4_k2 0.90-0.92x)"),
        (64, 14336, 4096, '16_bk', 'dot_64x128x128_s3_w4', "H100 2026-12-05 1.07x (dot_64x128x64_s4_w4 1.02x)"),
        (64, 4096, 14336, '16_bk', 'dot_64x32x128_s8_w4', "H100 2026-12-05 1.06x (dot_64x64x64_s4_w4_k4 0.97-0.98x)"),
        (64, 128256, 4096, '16_bk', 'dot_64x128x128_s3_w4', "H100 2026-12-05 1.07x (dot_64x128x64_s4_w4 1.02x)"),
        (128, 4096, 14336, '16_bk', 'dot_64x64x128_s6_w4', "H100 2026-12-05 1.14x (dot_128x128x128_s3_w8_k4 1.01-1.09x)"),
        (512, 4096, 14336, '16_bk', 'ws_128x128x64_s6_np', "H100 2026-12-05 0.99x (ws_128x128x64_s5 0.95-0.96x)"),
        (1213, 14336, 4096, '16_bn', 'ws_128x192x64_s4_sub1', "H100 2026-12-05 0.91x in two runs (ws_192x128x64_s5 0.67-0.95x in "
                                                               "three, ws_128x256x64_s4 0.86x)"),
        (1213, 14336, 4096, '16_bk', 'ws_128x152x64_s6_swap', "H100 2026-12-06 0.956x (ws_128x192x64_s4_sub1 0.908x, "
                                                               "0.91-0.92x in three earlier runs; ws_192x128x64_s5 0.75x)"),
        (1213, 4096, 1024, '16_bk', 'ws_256x152x64_s4_swap', "H100 2026-12-06 0.97-0.99x in two runs (ws_128x128x64_s5 "
                                                              "0.85-0.88x, ws_192x128x64_s5 0.86-0.88x)"),
        (2048, 2048, 2048, 'fp8_bk', 'ws8_128x256x128_s3', "H100 2026-12-05 1.08x (ws8_128x128x128_s4 1.03x)"),
        (4096, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H100 2026-12-05 1.00x (ws8_128x128x128_s4 0.94x)"),
        (2048, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H100 2026-12-05 0.99x (ws8_128x128x128_s4 0.93x)"),
        (8192, 4096, 4096, 'fp8_bk', 'ws8_128x256x128_s3', "H100 2026-12-05 1.00x (ws8_128x128x128_s4 0.95x)"),
        (128, 4096, 4096, 'fp8_bk', 'dot_64x64x128_s6_w4', "H100 2026-12-06 0.914 / 0.920x in two runs (dot_64x64x128_s5_w4 "
                                                            "0.899 / 0.887x beside it; 0.93-0.94x on 2026-12-05)"),
        (128, 8192, 8192, 'fp8_bk', 'dot_64x64x128_s6_w4', "H100 2026-12-05 0.98x (dot8_64x128x128_s4_w4 0.88x)"),
        (1024, 1024, 1024, 'fp8_bk', 'dot_128x64x128_s4_w4', "H100 2026-12-06 0.98x in two runs (dot8_64x128x128_s4_w4 "
                                                             "0.96-0.97x)"),
        (64, 4096, 4096, 'fp8_bk', 'dot_64x32x256_s4_w4', "H100 2026-12-06 0.97 / 1.06x in two runs (dot_64x64x128_s5_w4 "
                                                          "0.90 / 0.975x)"),
        (128, 14336, 4096, 'fp8_bk', 'dot_128x64x128_s4_w4', "H100 2026-12-06 0.958 / 0.970x in two runs "
                                                             "(dot8_64x128x128_s4_w4 0.909 / 0.912x)"),
    ],
}


def card_of(device_name: str) -> str:
    """The ``MEASURED_BY_CARD`` key of a device name ("" for the H200 and every card not measured)."""
    return "H100" if "H100" in device_name else ""


def _distance(p: Problem, row) -> float:
    M, N, K = row[:3]
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in ((p.M, M), (p.N, N), (p.K, K)))


def rule_based(p: Problem) -> GemmConfig:
    """The fallback rules (docs/ops.md): one row against an ``nn.Linear`` weight -> the
    single-row kernel; small M -> the swapped pointer kernel (split over K
    when the N tiles cannot fill the SMs); few output tiles and long K -> split-K; big
    TMA-describable problems -> the warp-specialized kernel, wide tiles when every SM gets
    several; the rest -> the pointer kernel."""
    def pick(*names):
        for name in names:
            c = CONFIGS[name]
            if usable(c, p):
                return c
        return None

    if p.M == 1 and p.b_kmajor and not p.fp8:
        c = pick("gemv_8x512_s1_w4_u2")
        if c is not None:
            return c
    if p.M <= 64 and not p.fp8:
        tiles = -(-p.N // 64)
        if p.M <= 16:
            first = "swap_64x16x128_s4_w4_k4" if tiles < p.sms else "swap_64x16x128_s4_w4"
        else:
            first = "swap_128x64x64_s4_w4_k4" if -(-p.N // 128) < p.sms else "swap_128x64x64_s4_w4"
        c = pick(first, "swap_128x64x64_s4_w4", "swap_64x16x128_s4_w4", "dot_64x128x64_s4_w4")
        if c is not None:
            return c
    if p.fp8:
        tiles64 = -(-p.M // 64) * -(-p.N // 128)
        tiles128 = -(-p.M // 128) * -(-p.N // 128)
        if tiles128 < p.sms:     # few tiles (measured: split-K loses): 128x64 WS tiles, else 64x128 pointer tiles
            c = pick("ws8_128x64x128_s6_np_sub1" if tiles64 * 2 < p.sms else "dot8_64x128x128_s4_w4")
            if c is not None:
                return c
        wide = -(-p.M // 128) * -(-p.N // 256)
        c = pick("ws8_128x256x128_s3" if wide >= 8 * p.sms else "ws8_128x128x128_s4", "ws8_128x128x128_s4")
        if c is not None:
            return c
        return pick("dot_128x128x64_s3_w4", "dot_64x128x64_s4_w4") or CONFIGS["dot_64x128x64_s4_w4"]
    tiles128 = -(-p.M // 128) * -(-p.N // 128)
    if tiles128 < p.sms // 2 and p.K >= 1024:
        # fill the SMs: 128x128 tiles split 4 ways, or 64x128 split 4 or 8 when even fewer
        if tiles128 * 4 >= p.sms // 2:
            first = "dot_128x128x64_s3_w4_k4"
        else:
            first = "dot_64x128x64_s4_w4_k8" if tiles128 * 8 < p.sms // 2 else "dot_64x128x64_s4_w4_k4"
        c = pick(first, "dot_64x128x64_s4_w4_k4", "dot_128x128x64_s3_w4_k2")
        if c is not None:
            return c
    wide = -(-p.M // 128) * -(-p.N // 256)
    if wide >= 2 * p.sms:
        c = pick("ws_128x256x64_s4", "ws_128x128x64_s5")
        if c is not None:
            return c
    if tiles128 >= p.sms // 2:
        # half a round of 128x128 tiles or more: the WS kernel (measured off the table, H200
        # 2026-12-04: 0.87-0.98x cuBLAS at 66-120 tiles where the pointer kernel ran 0.77-0.91x)
        c = pick("ws_128x128x64_s5", "dot_128x128x64_s3_w4")
        if c is not None:
            return c
    return pick("dot_128x128x64_s3_w4", "dot_64x128x64_s4_w4") or CONFIGS["dot_64x128x64_s4_w4"]


def rounds(c: GemmConfig, p: Problem) -> tuple[int, float]:
    """(rounds, fill) of ``c`` on ``p``: its programs (tiles, times the splits) run in rounds of
    ``sms`` x the programs an SM holds at once (shared memory, threads; a persistent WS kernel
    walks its tiles in the same rounds), and ``fill`` is the fraction of those rounds' slots
    they use (1.0: the last round is full)."""
    if c.kernel == "gemv":
        return 1, 1.0
    rows, cols = (p.N, p.M) if c.swap else (p.M, p.N)
    if c.share_a:       # a pair's tiles side by side
        programs = -(-rows // c.bm) * -(-cols // (c.bn * c.cluster_m)) * c.cluster_m * c.split_k
    else:
        programs = -(-rows // (c.bm * c.cluster_m)) * -(-cols // c.bn) * c.cluster_m * c.split_k
    if c.kernel == "ws":
        per_sm = 1
    else:
        smem = c.stages * (c.bm * c.bk + c.bk * c.bn) * p.elt + 1024
        per_sm = max(1, min(SM_SHARED // smem, 2048 // (32 * c.warps)))
    slots = p.sms * per_sm
    n = -(-programs // slots)
    return n, programs / (n * slots)


SM_SHARED = 233472                 # bytes of shared memory per SM on sm_90 (the programs resident at once share it)
WAVE_LOSS = 0.2                    # a borrowed row's configuration may fill its rounds this much worse


def _borrowable(c: GemmConfig, p: Problem, row) -> bool:
    """A measured row's configuration fits ``p`` too: it can run it, and on ``p`` it does not
    spill into an extra round that stays mostly empty (1024^3 is 128 64x128 tiles, one round;
    1000x1240 is 160: a second round a fifth full, and 0.57x cuBLAS where 128x128 tiles run
    0.97x, H200 2026-12-04)."""
    if not usable(c, p):
        return False
    own = Problem(row[0], row[1], row[2], p.elt, p.out_elt, b_kmajor=row[3].endswith("_bk"), fp8=p.fp8, sms=p.sms,
                  card=p.card, promote=p.promote)
    (n_p, fill_p), (n_own, fill_own) = rounds(c, p), rounds(c, own)
    return not (n_p > n_own and fill_p < fill_own - WAVE_LOSS)


@functools.lru_cache(maxsize=4096)
def _choose_cached(p: Problem) -> GemmConfig:
    return choose_config(p, MEASURED_BY_CARD.get(p.card, []) + MEASURED)


def choose_config(p: Problem, table=None) -> GemmConfig:
    """The configuration for ``p``: the nearest measured shape of its kind (within a factor
    of 2 on each of M, N and K together: log2 distance <= 1.5; at equal distance the earlier
    row, so a card's own rows before the H200's) whose configuration can run
    ``p`` and, unless the shape is the row's own, does not spill into a mostly empty extra
    round there (``_borrowable``); else ``rule_based``."""
    if table is None:
        return _choose_cached(p)
    rows = sorted((r for r in table if r[3] == p.kind), key=lambda r: _distance(p, r))
    for row in rows:
        if _distance(p, row) > 1.5:
            break
        c = CONFIGS.get(row[4])
        if c is not None and usable(c, p) and _distance(p, row) == 0:
            return c
        if c is not None and _borrowable(c, p, row):
            return fit_rounds(c, p)
    return rule_based(p)


# Whole-tile WS configurations a borrowed pick may be traded for when their tiles fill the rounds
# better, with each one's throughput per tile area relative to 128x256's (H200, the dense squares
# and the odd-M runs of 2026-12-04: 192x128 and 128x192 tiles run 0.97x / 0.95x its rate; the
# swapped 256x160 tile 0.90x since its two products are one m64n160 (fuse-dot-pairs; 0.84x before),
# 2026-12-05: one round where 297 or 1213 rows need two of 192x128; 2500 rows 0.93 / 0.96x cuBLAS
# against 128x256's 0.84x); the 152-wide one (128 + 16 + 8, one m64n152) at the same rate per area:
# 297x14336x4096 and 1213x4096x4096 0.93x where 160 runs 0.88-0.89x (304 / 1216 rows of products
# instead of 320 / 1280), but 459 rows are four of its tiles (0.51x against 160's 0.90x).
# Session 39 (H100): with C^T stored as the output's rows by TMA (its pointer stores had cost the swapped
# tiles ~4.7 us a launch) the swapped tiles run 0.97-0.99x cuBLAS where cuBLAS runs the same tile
# (297x14336x4096, 1213x4096x4096: 0.97 against 128x256's 1.0), and the 128-row one (64 of N a
# consumer) 0.96-0.99x at 600 / 1213 rows (600x4096x4096: four 152-wide tiles of M, 128 tiles, one round).
ROUND_FIT = {"ws_128x256x64_s4": 1.0, "ws_192x128x64_s5": 0.97, "ws_128x192x64_s4_sub1": 0.95,
             "ws_256x160x64_s4_swap": 0.97, "ws_256x152x64_s4_swap": 0.97, "ws_128x152x64_s6_swap": 0.95}
ROUND_FIT_B_KMAJOR = ("ws_256x160x64_s4_swap", "ws_256x152x64_s4_swap",   # measured on a K-major B only
                      "ws_128x152x64_s6_swap")
ROUND_FIT_GAIN = 0.05      # trade only for a modeled time at least this much shorter


def _modeled_time(c: GemmConfig, p: Problem, rate: float) -> float:
    """Rounds of ``c``'s tiles on ``p`` times one tile's time, in 128x256 tile-times."""
    return rounds(c, p)[0] * c.bm * c.bn / (128 * 256) / rate


def fit_rounds(c: GemmConfig, p: Problem) -> GemmConfig:
    """A configuration borrowed from a measured neighbour, or the ``ROUND_FIT`` tile whose rounds
    ``p`` fills best when it is modeled ``ROUND_FIT_GAIN`` faster: the neighbour's rounds may be
    full where ``p``'s last one is mostly idle (297x14336x4096: 168 128x256 tiles are 1.27 rounds,
    2 tile-times; 224 192x128 tiles, 2 rounds of 0.77; H200 2026-12-04: 0.59x -> 0.78x cuBLAS)."""
    if c.kernel != "ws" or c.fp8 or c.stream_k or (c.name not in ROUND_FIT and c.bm * c.bn < 128 * 192):
        return c                # (small tiles: picked for their own reasons, not traded)
    own = _modeled_time(c, p, ROUND_FIT.get(c.name, 1.0))
    best, best_t = c, own
    for name, rate in ROUND_FIT.items():
        alt = CONFIGS[name]
        if name in ROUND_FIT_B_KMAJOR and not p.b_kmajor:
            continue
        if usable(alt, p) and _modeled_time(alt, p, rate) < best_t:
            best, best_t = alt, _modeled_time(alt, p, rate)
    return best if best_t <= own * (1 - ROUND_FIT_GAIN) else c
