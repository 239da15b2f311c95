"""``tlxc.ops.attention_decode``: one new query token per sequence against a KV cache,
paged (``block_table``) or not, split over the cache length (flash-decoding).

    o, lse = attention_decode(q, k_cache, v_cache, cache_seqlens, block_table=None, sm_scale=None)

* ``q``: ``[B, H, D]`` (or flash-attn's ``[B, 1, H, D]``; ``o`` takes ``q``'s shape);
* paged cache (``block_table`` given, vLLM / flash-attn's ``flash_attn_with_kvcache``
  layout): ``k_cache``/``v_cache`` ``[num_pages, page_size, Hkv, D]``, ``block_table`` int32
  ``[B, max_pages]``: key ``n`` of sequence ``b`` is row ``n % page_size`` of page
  ``block_table[b, n // page_size]`` (any page size, pages in any order; entries past a
  sequence's length are never read);
* contiguous cache (no ``block_table``): ``k_cache``/``v_cache`` ``[B, S_cache, Hkv, D]``;
* ``cache_seqlens``: int32 ``[B]`` on ``q``'s device, the keys of each sequence (0 allowed:
  ``o = 0``, ``lse = -inf``), at most the cache's capacity (``max_pages * page_size`` or
  ``S_cache``) -- checked on the device (a located device assertion), never by a host sync;
  block-table entries in use are checked against ``num_pages`` the same way;
* GQA/MQA: ``H % Hkv == 0``; the query heads of one kv head are the rows of one MMA tile, so
  the cache is read once per kv head;
* ``lse``: float32 ``[B, H]``, natural log (as ``attention_forward``'s).

No causal mask (one query at the end of its sequence sees every cached key, as flash-attn's
bottom-right alignment gives).  Kernels: ``kernels/attention_decode.py``.  Two schedules:
``split`` (the default): one program per (sequence, kv head, split of the capacity);
``stream`` (``schedule="stream"``; faster on mixed lengths, slower on equal ones: session 13
run 2): a persistent grid of two programs per SM that share every (sequence, kv head)'s key
blocks evenly (counted on the device from the lengths) through one cp.async ring running
across rows, and a merge of the rows cut by program boundaries.
Neither reads ``cache_seqlens`` on the host (the grids follow from the shapes): CUDA-graph
friendly.
"""
from __future__ import annotations

import math

import torch

from .. import language as tl
from ..descriptors import TensorDescriptor
from ..torch_ops import register_custom_op
from .attention import _check_common, check_softcap, check_window, ints_align
from .compile_only import CompileOnly
from .kernels.attention_decode import (
    LOG2E,
    decode_check_kernel,
    decode_combine_kernel,
    decode_split_kernel,
    decode_stream_combine_kernel,
    decode_stream_kernel,
)

HEAD_DIMS = range(1, 257)
TL_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
MIN_SPLIT = 1024           # keys per split at least: each program fills its ring once (a few us)
MIXED_SPLIT = 2048         # keys per split at most from the wave rule: the split count comes from the
#                            capacity, not the lengths (they stay on the device); in a batch of mixed
#                            lengths the short sequences' splits are empty and the long ones' carry it
COMBINE_TILE = 8192        # splits x padded head dim at most: the merge's [splits, D] float32 tile
FILL_SPLIT = 256           # shorter splits only to give every SM two programs
CPU_SMS = 2                # the "SM count" on the interpreter (small splits exercise the combine)

_COMPILE_ONLY = CompileOnly()          # compile_decode: launches compile for sm_90a instead
_launch = _COMPILE_ONLY.launch


def _fail(message: str) -> ValueError:
    return ValueError(f"tlxc.ops.attention_decode: {message}")


def compile_decode(*args, sms: int = 132, **kwargs) -> list:
    """Compile (sm_90a, no launch) the kernels ``attention_decode(*args, **kwargs)`` would
    launch on a GPU of ``sms`` SMs (an H200 by default), from CPU tensors; the handles."""
    return _COMPILE_ONLY.collect(attention_decode, *args, _sms=sms, **kwargs)


def block_sizes(D: int, schedule: str = "split") -> tuple[int, int, int, int]:
    """(padded head dim, query rows per tile, keys per block, ring stages): 64 query rows
    (the wgmma's M: a GQA group of up to 64 heads, zero rows past it), 64-key blocks (32 at
    head dims above 128); the K/V ring sized so that two programs fit an SM at D <= 128.  The
    split kernel at head dims 65-128 keeps one block in flight, not two: on the H200 (session
    19, six decode cases) 2.3 % faster than three stages (0.965-0.992 of their time), at the same
    two programs an SM (80 KB of shared memory and 170 registers each)."""
    head_dim = max(64, 1 << (D - 1).bit_length())
    block_n = 64 if head_dim <= 128 else 32
    stages = 4 if head_dim <= 64 else 2 if head_dim <= 128 and schedule == "split" else 3
    return head_dim, 64, block_n, stages


def split_programs_per_sm(head_dim: int) -> int:
    """Split programs resident on one SM at once (their K/V ring's shared memory: 72 KB at head
    dims up to 64, 80 KB and 170 registers a thread up to 128, 128 KB above; 227 KB and 64K
    registers an SM)."""
    return 3 if head_dim <= 64 else 2 if head_dim <= 128 else 1


def num_splits_for(capacity: int, B: int, Hkv: int, g_chunks: int, block_n: int, sms: int,
                   head_dim: int = 128) -> tuple[int, int]:
    """(splits, keys per split): one wave of programs (``split_programs_per_sm`` per SM: every
    program starts at once and fills its ring once) but at least ``capacity // MIXED_SPLIT``
    splits, no split under ``MIN_SPLIT`` keys (but down to ``FILL_SPLIT`` where fewer programs
    would leave SMs idle: one sequence of a few thousand keys), at most ``COMBINE_TILE //
    head_dim`` splits, a split a whole number of key blocks.  On the H200 (session 19, D = 128,
    docs/performance.md) one wave ran 3.5-4.5 % faster than the earlier eight programs per SM
    (B8 L8192: 4 splits against 8; B64 L2048: 1 against 2; B16 H64/8 L4096: 2 against 4); a batch
    of mixed lengths (longest ~14000) ran 13 % slower with the wave's 3 splits than with 9, hence
    the floor of a split per 2048 keys of capacity."""
    rows = max(1, B * Hkv * g_chunks)
    fill = min(-(-2 * sms // rows), capacity // FILL_SPLIT)     # two programs per SM, if splits of 256 keys allow
    wave = max(split_programs_per_sm(head_dim) * sms // rows, capacity // MIXED_SPLIT)
    splits = max(1, min(wave, max(capacity // MIN_SPLIT, fill), COMBINE_TILE // head_dim))
    split_len = -(-max(1, -(-capacity // splits)) // block_n) * block_n
    return max(1, -(-capacity // split_len)), split_len


def _check(q, k_cache, v_cache, cache_seqlens, block_table, sm_scale):
    _check_common(q, k_cache, v_cache, op="tlxc.ops.attention_decode", names=("k_cache", "v_cache"),
                  head_dims=HEAD_DIMS)
    if not isinstance(cache_seqlens, torch.Tensor):
        raise TypeError(f"tlxc.ops.attention_decode: 'cache_seqlens' must be a tensor, got "
                        f"{type(cache_seqlens).__name__}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise _fail(f"'{name}' must be [num_pages, page_size, Hkv, D] (with block_table) or [B, S_cache, Hkv, D], "
                        f"got {tuple(t.shape)}")
    if k_cache.shape != v_cache.shape:
        raise _fail(f"'k_cache' {tuple(k_cache.shape)} and 'v_cache' {tuple(v_cache.shape)} must have one shape")
    if q.dim() == 4 and q.shape[1] != 1:
        raise _fail(f"a 4-D 'q' must be [B, 1, H, D] (one new token per sequence), got {tuple(q.shape)}")
    if q.dim() not in (3, 4):
        raise _fail(f"'q' must be [B, H, D] or [B, 1, H, D], got {tuple(q.shape)}")
    B, H, D = q.shape[0], q.shape[-2], q.shape[-1]
    Hkv = k_cache.shape[2]
    if Hkv == 0 or H % Hkv:
        raise _fail(f"'k_cache'/'v_cache' have {Hkv} heads, which must divide q's {H} heads (GQA/MQA)")
    if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (B,):
        raise _fail(f"'cache_seqlens' must be an int32 tensor of shape ({B},), got {cache_seqlens.dtype} "
                    f"{tuple(cache_seqlens.shape)}")
    if cache_seqlens.device != q.device:
        raise _fail(f"'cache_seqlens' is on {cache_seqlens.device}, 'q' on {q.device}")
    if block_table is not None:
        if not isinstance(block_table, torch.Tensor):
            raise TypeError(f"tlxc.ops.attention_decode: 'block_table' must be a tensor, got "
                            f"{type(block_table).__name__}")
        if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != B:
            raise _fail(f"'block_table' must be an int32 tensor [B={B}, max_pages], got {block_table.dtype} "
                        f"{tuple(block_table.shape)}")
        if block_table.device != q.device:
            raise _fail(f"'block_table' is on {block_table.device}, 'q' on {q.device}")
    elif k_cache.shape[0] != B:
        raise _fail(f"without block_table the cache is [B, S_cache, Hkv, D]: 'k_cache' has batch {k_cache.shape[0]}, "
                    f"'q' has {B}")
    if sm_scale is None:
        return 1.0 / math.sqrt(D)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale) \
            or sm_scale <= 0:
        raise _fail(f"'sm_scale' must be a positive finite number, got {sm_scale!r}")
    return float(sm_scale)


def _row_major(shape) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape`` (what ``.contiguous()`` gives)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


COMBINES = ("kernel", "inline")
SCHEDULES = ("stream", "split")
# the split kernel's variant bits by default (``attention_decode``'s ``_variant``): all three, 1.044x
# the plain kernel's speed on the H200 (2026-12-04 05:20, 6 decode cases, min 1.031x) once register A
# stayed put across the loop (codegen fix 0b35d6d; before it ptxas 13.0 reused Q's registers for P)
SPLIT_VARIANT = 7
STREAM_CHUNK = 1024        # sequences per step of the stream kernels' scans over the lengths
STREAM_MERGE = 16          # partials per step of the stream combine's merge
STREAM_MERGE_HEADS = 64    # ... with _heads (a sequence's row spans up to every program: B = 1, 264 partials)


def stream_programs(B: int, rows_per_seq: int, capacity: int, block_n: int, head_dim: int, sms: int) -> int:
    """The stream schedule's grid: two programs per SM where their shared memory fits (head
    dims up to 128), one above; never more than the key blocks the cache can hold."""
    per_sm = 2 if head_dim <= 128 else 1
    return max(1, min(per_sm * sms, B * rows_per_seq * -(-capacity // block_n)))


def _split_counters(device: torch.device, n: int) -> torch.Tensor:
    """Arrival counters of the inline combine, one int32 per (sequence, kv head, head tile),
    zero between launches (the last split resets its own); one buffer per (device, stream):
    launches on one stream run in order.  Allocated (zeroed) on the first call for a size, so
    that call must come before a CUDA graph capture."""
    stream = torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else 0
    key = (device, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("tlxc.ops.attention_decode: the first call with this many (sequence, kv head) pairs "
                               "allocates the split counters, which a CUDA graph capture does not allow; call it "
                               "once before capturing")
        buf = _COUNTERS[key] = torch.zeros(max(n, 4096), device=device, dtype=torch.int32)
    return buf


_COUNTERS: dict[tuple, torch.Tensor] = {}


class _Plan:
    """What ``attention_decode`` derives from its arguments' shapes, strides, dtypes, devices
    and options alone (every check made): the launches, each a kernel, grid, arguments (the
    call's tensors as names, filled per call) and options.  Cached by those properties
    (``_PLANS``), so a repeated decode step skips the checks and the arithmetic."""
    __slots__ = ("B", "D", "H", "copies", "empty", "launches", "parts", "q4", "tma_box")

    def run(self, q, k_cache, v_cache, cache_seqlens, block_table):
        cq, ck, cv, cl, cb = self.copies                        # operands the kernels need with a unit last stride
        q3 = q.reshape(self.B, self.H, self.D) if self.q4 else q
        t = {"q": q3.contiguous() if cq else q3, "k": k_cache.contiguous() if ck else k_cache,
             "v": v_cache.contiguous() if cv else v_cache, "lens": cache_seqlens.contiguous() if cl else cache_seqlens}
        t["bt"] = t["lens"] if block_table is None else (block_table.contiguous() if cb else block_table)
        o = q.new_empty((self.B, self.H, self.D))
        lse = torch.empty((self.B, self.H), device=q.device, dtype=torch.float32)
        out = o.view(q.shape) if self.q4 else o
        if self.empty is not None:
            if self.empty:                      # a cache of capacity 0
                o.zero_()
                lse.fill_(float("-inf"))
            return out, lse
        t["o"], t["lse"] = o, lse
        if self.parts is None:
            t["o_part"], t["lse_part"] = o, lse
        else:
            t["o_part"] = torch.empty(self.parts[0], device=q.device, dtype=torch.float32)
            t["lse_part"] = torch.empty(self.parts[1], device=q.device, dtype=torch.float32)
        if self.tma_box is not None:
            t["kdesc"], t["vdesc"] = (_page_descriptor(t[n], self.tma_box) for n in ("k", "v"))
        for kernel, grid, template, slots, meta, locks in self.launches:
            if locks:
                t["locks"] = _split_counters(q.device, locks)
            args = list(template)
            for i, name in slots:
                args[i] = t[name]
            if any(isinstance(a, _Arg) for a in meta.values()):
                meta = {n: t[a] if isinstance(a, _Arg) else a for n, a in meta.items()}
            _launch(kernel, grid, *args, **meta)
        return out, lse

    def add(self, kernel, grid, args: tuple, meta: dict, locks: int = 0) -> None:
        """A launch: ``args`` with the call's tensors as ``_Arg`` names; ``locks``: the split
        counters it takes (that many, per call: ``_split_counters``)."""
        slots = tuple((i, a) for i, a in enumerate(args) if isinstance(a, _Arg))
        self.launches.append((kernel, grid, args, slots, meta, locks))


def _page_descriptor(cache: torch.Tensor, rows: int) -> TensorDescriptor:
    """The TMA descriptor of a ``[num_pages, page, Hkv, D]`` cache seen as ``[num_pages, Hkv, page, D]``,
    boxes of ``rows`` rows of one kv head x 64 columns (a dimension of size 1 gets an aligned stride:
    TMA checks every one)."""
    heads_major = cache.permute(0, 2, 1, 3)                       # [num_pages, Hkv, page, D]: boxes [1, 1, rows, 64]
    strides = tuple(heads_major.stride())
    aligned = -(-max(strides[:-1]) // 8) * 8
    strides = tuple(aligned if n == 1 and d < 3 else st for d, (n, st) in enumerate(zip(heads_major.shape, strides)))
    return TensorDescriptor(heads_major, tuple(heads_major.shape), strides, [1, 1, rows, 64], swizzle=128)


class _Arg(str):
    """A launch argument that is one of the call's tensors (named)."""


def _options(**meta) -> dict:
    """A launch's constexpr and launch options (as ``kernel[grid](..., **meta)`` takes them)."""
    return meta


_PLANS: dict[tuple, _Plan] = {}
_MAX_PLANS = 256


def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: torch.Tensor, *,
                     block_table: torch.Tensor | None = None, sm_scale: float | None = None,
                     num_splits: int | None = None, combine: str = "kernel", schedule: str | None = None,
                     check: bool = True, window: tuple[int, int] | None = None, softcap: float | None = None,
                     _sms: int | None = None, _ring: tuple[int, int] | None = None, _heads: bool = False,
                     _variant: int | None = None, _tma: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(o, lse)`` of one query token per sequence against its cached keys (module
    docstring).  ``window=(left, right)`` (flash-attn's ``window_size``, ``tlxc.ops.attention``'s
    spelling; -1 unbounded): the query is its sequence's last token (position ``len - 1``), so it
    sees keys ``len - 1 - left .. len - 1`` and ``right`` bounds nothing (the cache holds no later
    key); only the window's key blocks are read.  ``softcap``: Gemma 2's logit softcapping, the
    scores ``softcap * tanh(q.k * sm_scale / softcap)``.  Both take the split schedule.
    ``num_splits`` overrides the split count, ``combine`` how several splits are
    merged: ``kernel`` (a second launch, which also checks the inputs; the default: 4-10%
    faster on the H200) or ``inline`` (the last split of each (sequence, kv head) to finish,
    counted by an atomic, merges them at the end of the split kernel); for tests and
    benchmarks.  ``check=False`` skips
    the device-side check of ``cache_seqlens`` and ``block_table`` (one small launch): the
    caller vouches for them (a length is then clamped to the capacity and a row of a page
    outside the cache is not read, so a bad value gives a wrong result, not a fault).
    ``schedule``: ``split`` (the default: one program per (sequence, kv head, split of the
    capacity)) or ``stream`` (head dims up to 128 without spills; not with ``num_splits``/
    ``combine``: a persistent grid sharing the key blocks evenly, one cp.async ring across its
    rows, a merge kernel for the rows cut by program boundaries; on the H200 1.18x split's
    speed on a batch of mixed lengths, 0.88-0.96x on equal lengths).  The checks and launch arguments
    are derived once per combination of shapes, strides, dtypes, devices and options (a cached
    plan).  ``_sms`` (the SM count) and ``_ring`` (keys per block, ring slots: the bench's ring
    A/B) override the device's and ``block_sizes``'; ``_heads=True`` (stream schedule, H <= 64):
    one row per sequence whose blocks hold a few keys of every kv head (contiguous in a
    ``[pages, page, Hkv, D]`` cache: the bench's DRAM-locality A/B).  ``_variant`` (split
    schedule, a bit mask; None = ``SPLIT_VARIANT`` on the split schedule without ``_tma``, else 0):
    session 13's three split-kernel changes (1: copy mask in the copy layout, 2: ``[BLOCK_N, 1]``
    page loads, 4: the length mask on the last block only), for A/B runs and the GPU-vs-interpreter
    probe (tests/test_gpu_ops_attention_decode.py); bit 8 is a diagnostic whose output is
    meaningless (the ring of copies alone, no products and no softmax: the bench's bound on what
    the block math costs); bit 16 (with bits 1, 2) asks the cache's copies for ``evict_first`` in L2, which the
    lowering drops with a performance warning (its hinted cp.async stopped the GPU: a regression case).
    ``_tma=True`` (split schedule, paged, D <= 128, the page size a multiple or a divisor of the
    key block and of at least 8 rows, 16-byte aligned rows; at D = 256 it spills): the K/V ring filled by one TMA copy per page
    box (no per-row addresses, no cp.async) instead: the bench's ``tlxc_tma`` A/B."""
    try:
        key = (q.shape, q.stride(), q.dtype, q.device, k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.device,
               v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.device, cache_seqlens.shape,
               cache_seqlens.stride(), cache_seqlens.dtype, cache_seqlens.device,
               None if block_table is None else (block_table.shape, block_table.stride(), block_table.dtype,
                                                 block_table.device),
               type(sm_scale), sm_scale, type(num_splits), num_splits, combine, schedule, type(check), check, _sms,
               _ring, _heads, _variant, _tma, type(window), window if window is None else tuple(window),
               type(softcap), softcap)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):             # not tensors, or unhashable options: the checks say which
        key = plan = None
    if plan is None:
        plan = _plan(q, k_cache, v_cache, cache_seqlens, block_table, sm_scale, num_splits, combine, schedule, check,
                     _sms, _ring, _heads, _variant, _tma, window, softcap)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    return plan.run(q, k_cache, v_cache, cache_seqlens, block_table)


def _window_softcap(window, softcap) -> tuple[int, float]:
    """(WIN_LEFT, SOFTCAP) of ``window``/``softcap`` by ``tlxc.ops.attention``'s rules (the
    query is the last token: the right side bounds nothing), with this op's name in the error."""
    try:
        left, _ = check_window(window, True)
        return left, check_softcap(softcap)
    except ValueError as error:
        raise _fail(str(error).split(": ", 1)[1]) from None


def _plan(q, k_cache, v_cache, cache_seqlens, block_table, sm_scale, num_splits, combine, schedule, check,
          _sms, _ring, _heads, _variant=None, _tma=False, window=None, softcap=None) -> _Plan:
    """The checks of ``attention_decode``'s arguments and its launches (``_Plan``)."""
    if not isinstance(check, bool):
        raise TypeError(f"tlxc.ops.attention_decode: 'check' must be a bool, got {type(check).__name__}")
    sm_scale = _check(q, k_cache, v_cache, cache_seqlens, block_table, sm_scale)
    win_left, cap = _window_softcap(window, softcap)
    if num_splits is not None and (not isinstance(num_splits, int) or num_splits < 1):
        raise _fail(f"'num_splits' must be a positive int, got {num_splits!r}")
    if combine not in COMBINES:
        raise _fail(f"'combine' must be one of {', '.join(COMBINES)}, got {combine!r}")
    if schedule is None:        # split: 1.04-1.13x stream's speed on equal lengths (H200, session 13 run 2)
        schedule = "split"
    if schedule not in SCHEDULES:
        raise _fail(f"'schedule' must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if _heads is not False and (_heads is not True or schedule != "stream"):
        raise _fail(f"'_heads' is a bool for schedule='stream', got {_heads!r} with schedule={schedule!r}")
    if _variant is None:
        _variant = SPLIT_VARIANT if schedule == "split" and _tma is False else 0
    if not (isinstance(_variant, int) and 0 <= _variant <= 31) or (_variant and schedule != "split"):
        raise _fail(f"'_variant' is a bit mask 0..31 of the split schedule, got {_variant!r} with schedule={schedule!r}")
    if not isinstance(_tma, bool) or (_tma and (schedule != "split" or _variant & 3)):
        raise _fail(f"'_tma' is a bool of the split schedule (not with _variant bits 1, 2), got {_tma!r} with "
                    f"schedule={schedule!r}")
    if schedule == "stream" and (win_left >= 0 or cap > 0):
        raise _fail("'window' and 'softcap' take schedule='split' (the default)")
    if schedule == "stream" and (num_splits is not None or combine != "kernel"):
        raise _fail("'num_splits' and 'combine' belong to schedule='split' (the stream schedule splits by key "
                    "blocks on the device)")
    B, H, D = q.shape[0], q.shape[-2], q.shape[-1]
    Hkv = k_cache.shape[2]
    plan = _Plan()
    plan.B, plan.H, plan.D, plan.q4 = B, H, D, q.dim() == 4
    q3 = q.reshape(B, H, D) if q.dim() == 4 else q
    plan.copies = tuple(t is not None and t.stride(-1) != 1 for t in (q3, k_cache, v_cache, cache_seqlens, block_table))
    q_strides = q3.stride()[:2] if q3.stride(-1) == 1 else (H * D, D)            # (of the copy, when it is made)
    sk, sv = (t.stride()[:3] if t.stride(-1) == 1 else _row_major(t.shape)[:3] for t in (k_cache, v_cache))
    paged = block_table is not None
    page = k_cache.shape[1] if paged else 1
    capacity = block_table.shape[1] * page if paged else k_cache.shape[1]
    plan.empty = plan.parts = plan.tma_box = None
    plan.launches = []
    if B == 0 or H == 0 or capacity == 0:
        plan.empty = B > 0 and H > 0
        return plan
    group = H // Hkv
    head_dim, block_g, block_n, stages = block_sizes(D, schedule)
    if _ring is not None:
        if not (isinstance(_ring, tuple) and len(_ring) == 2 and _ring[0] in (16, 32, 64, 128)
                and isinstance(_ring[1], int) and 2 <= _ring[1] <= 8):
            raise _fail(f"'_ring' must be (keys per block in 16, 32, 64, 128; slots 2..8), got {_ring!r}")
        block_n, stages = _ring
    g_chunks = -(-group // block_g)
    sms = _sms or (torch.cuda.get_device_properties(q.device).multi_processor_count if q.device.type == "cuda"
                   else CPU_SMS)
    if paged:
        bt = _Arg("bt")
        stride_bt = block_table.stride(0) if block_table.stride(-1) == 1 else block_table.shape[1]
        num_pages = k_cache.shape[0]
    else:
        bt, stride_bt, num_pages = _Arg("lens"), 0, 1          # (never read without pages)
    Q, K, V, LENS, O, LSE, OP, LP = (_Arg(n) for n in ("q", "k", "v", "lens", "o", "lse", "o_part", "lse_part"))
    if schedule == "stream":
        if _heads:          # a row per sequence, a block = block_n // Hkv keys x all Hkv kv heads
            if not (H <= block_g and 2 <= Hkv and block_n % Hkv == 0 and head_dim <= 128):
                raise _fail(f"'_heads' takes H <= {block_g}, 2 <= Hkv dividing {block_n}, D <= 128; got H = {H}, "
                            f"Hkv = {Hkv}, D = {D}")
            keys, rows_kv, row_group, kv_heads, merge = block_n // Hkv, 1, H, Hkv, STREAM_MERGE_HEADS
        else:
            keys, rows_kv, row_group, kv_heads, merge = block_n, Hkv, group, 0, STREAM_MERGE
        rows_per_seq = rows_kv * -(-row_group // block_g)
        if B * rows_per_seq * -(-capacity // keys) >= 2 ** 31:
            raise _fail(f"{B} sequences x {rows_per_seq} kv rows x {capacity} keys is too many key blocks "
                        f"for the stream schedule's int32 counts; use schedule='split'")
        programs = stream_programs(B, rows_per_seq, capacity, keys, head_dim, sms)
        tile = min(row_group, block_g)
        plan.parts = ((programs, 2, tile, D), (programs, 2, tile))
        chunk = min(STREAM_CHUNK, max(2, 1 << (B - 1).bit_length()))
        plan.add(decode_stream_kernel, (programs,), (
            Q, K, V, bt, LENS, O, LSE, OP, LP, B, rows_kv, capacity, num_pages, sm_scale * LOG2E, *q_strides, *sk,
            *sv, stride_bt, H * D, D, H, 1), _options(
            D=D, HEAD_DIM=head_dim, BLOCK_G=block_g, GROUP=row_group, TILE=tile, BLOCK_N=block_n, STAGES=stages,
            PAGE=page, PAGED=paged, SAME_KV=sk == sv, DTYPE=TL_DTYPES[q.dtype], CHUNK=chunk, KV_HEADS=kv_heads,
            num_warps=4))
        plan.add(decode_stream_combine_kernel, (B * H,), (
            OP, LP, O, LSE, LENS, bt, B, H, rows_kv, programs, capacity, num_pages, stride_bt, H * D, D, H, 1),
            _options(D=D, HEAD_DIM=head_dim, BLOCK_G=block_g, GROUP=row_group, TILE=tile, BLOCK_N=keys,
                     BLOCK_S=merge, CHUNK=chunk, CHECK=check, PAGE=page, PAGED=paged, num_warps=4, launch_pdl=True))
        return plan
    if num_splits is None:
        splits, split_len = num_splits_for(capacity, B, Hkv, g_chunks, block_n, sms, head_dim)
    else:
        if num_splits > COMBINE_TILE // head_dim:
            raise _fail(f"'num_splits' is {num_splits}; at head dim {D} the merge takes at most "
                        f"{COMBINE_TILE // head_dim} splits")
        per_split = -(-capacity // num_splits)
        split_len = -(-per_split // block_n) * block_n
        splits = -(-capacity // split_len)
    one = splits == 1
    so_final, sl_final = (H * D, D), (H, 1)                     # o [B, H, D] and lse [B, H], contiguous
    if one:
        so, sl = (*so_final, 0), sl_final                       # (o_part, lse_part are o, lse)
    else:
        plan.parts = ((B, H, splits, D), (B, H, splits))
        so, sl = (H * splits * D, splits * D, D), (H * splits, splits)
    fixup = not one and combine == "inline"
    rows = B * Hkv * g_chunks
    tma = {"TMA": False, "k_desc": None, "v_desc": None}
    if _tma:
        box = min(page, block_n)
        if not (paged and (page % block_n == 0 or block_n % page == 0) and box >= 8 and D % 8 == 0 and head_dim <= 128
                and all(t.stride(-1) == 1 and all((st * t.element_size()) % 16 == 0
                                                   for n, st in zip(t.shape[:-1], t.stride()[:-1]) if n > 1)
                        for t in (k_cache, v_cache))):
            raise _fail(f"'_tma' takes a paged cache whose page size ({page}) is a multiple or a divisor of the "
                        f"{block_n}-key block and at least 8, D <= 128 a multiple of 8 (got {D}), rows 16-byte "
                        f"aligned")
        plan.tma_box = box
        tma = {"TMA": True, "k_desc": _Arg("kdesc"), "v_desc": _Arg("vdesc")}
    # softcap: the scores are tanh(s * sm_scale / cap) in units of cap * log2(e) (cap_in = sm_scale / cap)
    masks = {"WIN_LEFT": win_left, "SOFTCAP": cap, "cap_in": None if win_left < 0 and cap == 0 else sm_scale / (cap or 1)}
    plan.add(decode_split_kernel, (rows, splits), (
        Q, K, V, bt, LENS, OP, LP, O, LSE, _Arg("locks") if fixup else LENS, Hkv, split_len, capacity, num_pages,
        (cap or sm_scale) * LOG2E, *q_strides, *sk, *sv, stride_bt, *so, *sl, *so_final, *sl_final), _options(
        D=D, HEAD_DIM=head_dim, BLOCK_G=block_g, GROUP=group, BLOCK_N=block_n, PAGE=page, STAGES=stages, PAGED=paged,
        ONE_SPLIT=one, FIXUP=fixup, SAME_KV=sk == sv, DTYPE=TL_DTYPES[q.dtype], PDL=check or not (one or fixup),
        BLOCK_S=max(2, 1 << (splits - 1).bit_length()), VARIANT=_variant, ALIGN=ints_align(*q_strides, *sk, *sv, *so),
        num_warps=4, **tma, **masks),
        rows if fixup else 0)
    if not one and not fixup:
        plan.add(decode_combine_kernel, (B * H,), (
            OP, LP, O, LSE, LENS, bt, H, splits, capacity, num_pages, stride_bt, *so, *sl, *so_final, *sl_final),
            _options(D=D, HEAD_DIM=head_dim, BLOCK_S=max(2, 1 << (splits - 1).bit_length()), CHECK=check, PAGE=page,
                     PAGED=paged, num_warps=4, launch_pdl=True))
    elif check:                 # no combine launch to check in: the checks as a dependent launch of their own
        plan.add(decode_check_kernel, (B,), (LENS, bt, B, capacity, num_pages, stride_bt), _options(
            PAGE=page, PAGED=paged, BLOCK=1024, num_warps=4, launch_pdl=True))
    return plan


def reference(q, k_cache, v_cache, cache_seqlens, *, block_table=None, sm_scale=None, dtype=torch.float64,
              window=None, softcap=None):
    """``(o, lse)`` in ``dtype`` by plain tensor math (the pages gathered on the host); ``window``
    (left, right) and ``softcap`` as ``attention_decode``'s."""
    left = -1 if window is None else window[0]
    B, H, D = q.shape[0], q.shape[-2], q.shape[-1]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    lens = cache_seqlens.tolist()
    o = torch.zeros((B, H, D), dtype=dtype, device=q.device)
    lse = torch.full((B, H), float("-inf"), dtype=dtype, device=q.device)
    qq = q.reshape(B, H, D).to(dtype)
    for b, n in enumerate(lens):
        if n == 0:
            continue
        if block_table is None:
            k, v = k_cache[b, :n], v_cache[b, :n]
        else:
            page = k_cache.shape[1]
            rows = torch.arange(n)
            pages = block_table[b].cpu()[rows // page]
            k, v = k_cache[pages, rows % page], v_cache[pages, rows % page]       # [n, Hkv, D]
        group = H // k.shape[1]
        k = k.to(dtype).repeat_interleave(group, 1)
        v = v.to(dtype).repeat_interleave(group, 1)
        s = torch.einsum("hd,nhd->hn", qq[b], k) * sm_scale
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        if left >= 0:
            s = s.masked_fill(torch.arange(n, device=s.device) < n - 1 - left, float("-inf"))
        lse[b] = torch.logsumexp(s, -1)
        o[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return (o.view(q.shape) if q.dim() == 4 else o), lse


def _decode_impl(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_seqlens: torch.Tensor,
                 block_table: torch.Tensor | None = None, sm_scale: float | None = None, window_left: int = -1,
                 softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_decode(q, k_cache, v_cache, cache_seqlens, block_table=block_table, sm_scale=sm_scale,
                            window=None if window_left < 0 else (window_left, -1), softcap=softcap or None)


def _decode_fake(q, k_cache, v_cache, cache_seqlens, block_table=None, sm_scale=None, window_left=-1, softcap=0.0):
    _check(q, k_cache, v_cache, cache_seqlens, block_table, sm_scale)
    _window_softcap(None if window_left < 0 else (window_left, -1), softcap or None)
    return q.new_empty(q.shape), q.new_empty((q.shape[0], q.shape[-2]), dtype=torch.float32)


attention_decode_op = register_custom_op("tlxc::attention_decode", _decode_impl, fake=_decode_fake)
