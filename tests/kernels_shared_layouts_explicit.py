"""Kernels with explicit shared layouts (tests/test_shared_layouts_explicit.py), written the way the
TLX attention backward writes them: a buffer pinned to a tiling of an NVMMA atom, filled by TMA
through an atom-layout view, read per row group by wgmma."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def grouped_dot(a_desc, b_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                GROUPS: tl.constexpr):
    """C = A @ B for one [BM, BN] tile: A [BM, BK] in a buffer tiled from [BM / GROUPS, BK / 2]
    atoms, each of GROUPS row groups multiplied from its own row slice of the atom view."""
    GM: tl.constexpr = BM // GROUPS
    a_atom: tl.constexpr = tlx.nv_mma_shared_layout_encoding((GM, BK // 2), [1, 0], tlx.dtype_of(a_desc),
                                                             [1, 1], [1, 1], [1, 0], False, True)
    b_atom: tl.constexpr = tlx.nv_mma_shared_layout_encoding((BK, BN), [1, 0], tlx.dtype_of(b_desc),
                                                             [1, 1], [1, 1], [1, 0], False, True)
    a = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), 1, layout=a_atom.tile_to_shape((BM, BK)))
    b = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), 1, layout=b_atom)
    c = tlx.local_alloc((GM, BN), tlx.dtype_of(c_desc), GROUPS)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    a_view = tlx.local_reinterpret(a[0], tlx.dtype_of(a_desc), [BM, BK], layout=a_atom, pin=False)
    tlx.barrier_expect_bytes(bar[0], (BM * BK + BK * BN) * 2)
    tlx.async_descriptor_load(a_desc, a_view, [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    for g in tl.static_range(GROUPS):
        a_rows = tlx.local_slice(a_view, [g * GM, 0], [GM, BK])
        acc = tlx.async_dot(a_rows, b[0], tl.zeros((GM, BN), dtype=tl.float32))
        acc = tlx.async_dot_wait(0, acc)
        tlx.local_store(c[g], acc.to(tlx.dtype_of(c_desc)))
    tlx.fence_async_shared()
    for g in tl.static_range(GROUPS):
        tlx.async_descriptor_store(c_desc, c[g], [g * GM, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def transposed_scores(x_ptr, w_desc, out_ptr, BN: tl.constexpr, BM: tl.constexpr, D: tl.constexpr,
                      GROUPS: tl.constexpr):
    """out = X^T @ W (X [BN, BM], W [BN, D]): each row group of X is stored (local_store) into its
    row slice of a [BN, BM] buffer tiled from [BN / GROUPS, BM] atoms, and wgmma reads the
    transposed view's column slices (MN-major A), as the attention backward's dq does."""
    GN: tl.constexpr = BN // GROUPS
    atom: tl.constexpr = tlx.nv_mma_shared_layout_encoding((GN, BM), [1, 0], tl.float16, [1, 1], [1, 1], [1, 0],
                                                           False, True)
    s = tlx.local_alloc((BN, BM), tl.float16, 1, layout=atom.tile_to_shape((BN, BM)))
    w = tlx.local_alloc((BN, D), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BN * D * 2)
    tlx.async_descriptor_load(w_desc, w[0], [0, 0], bar[0])
    view = tlx.local_reinterpret(s[0], tl.float16, [BN, BM], layout=atom, pin=False)
    view_t = tlx.local_trans(view)
    rows = tl.arange(0, GN)
    cols = tl.arange(0, BM)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    tlx.barrier_wait(bar[0], 0)
    for g in tl.static_range(GROUPS):
        x = tl.load(x_ptr + (g * GN + rows)[:, None] * BM + cols[None, :])
        tlx.local_store(tlx.local_slice(view, [g * GN, 0], [GN, BM]), x)
        tlx.fence_async_shared()
        acc = tlx.async_dot(tlx.local_slice(view_t, [0, g * GN], [BM, GN]),
                            tlx.local_slice(w[0], [g * GN, 0], [GN, D]), acc)
        acc = tlx.async_dot_wait(0, acc)
    out_rows = tl.arange(0, BM)
    out_cols = tl.arange(0, D)
    tl.store(out_ptr + out_rows[:, None] * D + out_cols[None, :], acc)
