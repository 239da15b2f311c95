"""Kernels for tests/test_tmem_alias.py: tensor-memory aliasing (``reuse=`` and a tmem
``storage_alias_spec``), 16-bit buffers packed two to a 32-bit column, one-column [128, 1]
buffers, and tcgen05 MMAs whose A operand is in tensor memory (P @ V of an attention step).

A ``BUG`` constexpr selects a broken variant; the line carries ``# BUG <name>``."""
from __future__ import annotations

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def pack_roundtrip(x_ptr: tl.pointer_type(tl.float16), out_ptr: tl.pointer_type(tl.int32), N: tl.constexpr = 64):
    """fp16 stored through a [128, N] alias, read back as the [128, N / 2] int32 words it
    packs into (element 2j in the low half of word j)."""
    words = tlx.local_alloc((128, N // 2), tl.int32, 1, storage=tlx.storage_kind.tmem)
    halves = tlx.local_alloc((128, N), tl.float16, 1, storage=tlx.storage_kind.tmem, reuse=words)
    rows = tl.arange(0, 128)
    cols = tl.arange(0, N)
    tlx.local_store(halves[0], tl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    w = tlx.local_load(words[0])
    tl.store(out_ptr + rows[:, None] * (N // 2) + tl.arange(0, N // 2)[None, :], w)


@tlxc.kernel
def spec_overlap(tile_ptr: tl.pointer_type(tl.float32), p_ptr: tl.pointer_type(tl.float16),
                 a_ptr: tl.pointer_type(tl.float32), l_ptr: tl.pointer_type(tl.float32),
                 out_ptr: tl.pointer_type(tl.float32), SPEC: tl.constexpr = True):
    """One [128, 128] fp32 tile shared with a [128, 128] fp16 buffer (its first 64 columns) and
    two one-column buffers after it: a tmem storage_alias_spec with a distinct group (SPEC), or
    TLX's older reuse= with the offsets written by hand (p[0], alpha[64], l[65])."""
    rows = tl.arange(0, 128)
    cols = tl.arange(0, 128)
    if SPEC:
        spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
        qk = tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
        p = tlx.local_alloc((128, 128), tl.float16, 1, tlx.storage_kind.tmem, reuse=spec)
        alpha = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
        l_buf = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
        spec.set_buffer_overlap(tlx.reuse_group(qk, tlx.reuse_group(p, alpha, l_buf,
                                                                     group_type=tlx.reuse_group_type.distinct),
                                                group_type=tlx.reuse_group_type.shared))
        p_view = p[0]
        alpha_view = alpha[0]
        l_view = l_buf[0]
    else:
        qk = tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem)
        p = tlx.local_alloc((128, 128), tl.float16, 2, tlx.storage_kind.tmem, reuse=qk)
        alpha = tlx.local_alloc((128, 1), tl.float32, 128, tlx.storage_kind.tmem, reuse=qk)
        l_buf = tlx.local_alloc((128, 1), tl.float32, 128, tlx.storage_kind.tmem, reuse=qk)
        p_view = p[0]
        alpha_view = alpha[64]
        l_view = l_buf[65]
    tlx.local_store(qk[0], tl.load(tile_ptr + rows[:, None] * 128 + cols[None, :]))
    tlx.local_store(p_view, tl.load(p_ptr + rows[:, None] * 128 + cols[None, :]))
    tlx.local_store(alpha_view, tl.load(a_ptr + rows)[:, None])
    tlx.local_store(l_view, tl.load(l_ptr + rows)[:, None])
    tl.store(out_ptr + rows[:, None] * 128 + cols[None, :], tlx.local_load(qk[0]))
    back = tlx.local_load(alpha_view)                       # [128, 1]
    tl.store(out_ptr + 128 * 128 + rows, tl.reshape(back, [128]))


@tlxc.kernel
def attention_step(q_ptr: tl.pointer_type(tl.float16), k_ptr: tl.pointer_type(tl.float16),
                   v_ptr: tl.pointer_type(tl.float16), o_ptr: tl.pointer_type(tl.float32), D: tl.constexpr = 64,
                   NK: tl.constexpr = 64, BUG: tl.constexpr = ""):
    """S = Q @ K^T into tensor memory, P = S as fp16 written over S's columns (reuse=), O = P @ V
    with P as the tensor-memory A operand; the MMAs complete through mbarriers."""
    rows = tl.arange(0, 128)
    ds = tl.arange(0, D)
    ks = tl.arange(0, NK)
    q = tlx.local_alloc((128, D), tl.float16, 1)
    k = tlx.local_alloc((NK, D), tl.float16, 1)
    v = tlx.local_alloc((NK, D), tl.float16, 1)
    tlx.local_store(q[0], tl.load(q_ptr + rows[:, None] * D + ds[None, :]))
    tlx.local_store(k[0], tl.load(k_ptr + ks[:, None] * D + ds[None, :]))
    tlx.local_store(v[0], tl.load(v_ptr + ks[:, None] * D + ds[None, :]))
    tlx.fence("async_shared")
    s = tlx.local_alloc((128, NK), tl.float32, 1, tlx.storage_kind.tmem)
    p = tlx.local_alloc((128, NK), tl.float16, 1, tlx.storage_kind.tmem, reuse=s)
    side = tlx.local_alloc((128, 1), tl.float32, 2 * NK, tlx.storage_kind.tmem, reuse=s)   # S's columns, and NK more
    o = tlx.local_alloc((128, D), tl.float32, 1, tlx.storage_kind.tmem)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    tlx.async_dot(q[0], tlx.local_trans(k[0]), s[0], use_acc=False, mBarriers=[bars[0]])
    if BUG == "p_over_running_mma":
        tlx.local_store(p[0], tl.zeros([128, NK], tl.float16))  # BUG p_over_running_mma
    if BUG == "beside_running_mma":     # correct: a column the MMA does not write
        tlx.local_store(side[NK + 3], tl.zeros([128, 1], tl.float32))
    tlx.barrier_wait(bars[0], 0)
    scores = tlx.local_load(s[0])
    tlx.local_store(p[0], scores.to(tl.float16))
    tlx.async_dot(p[0], v[0], o[0], use_acc=False, mBarriers=[bars[1]])
    tlx.barrier_wait(bars[1], 0)
    tl.store(o_ptr + rows[:, None] * D + ds[None, :], tlx.local_load(o[0]))
