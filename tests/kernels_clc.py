"""Kernels for cluster launch control (tests/test_clc.py): persistent loops that take the
tiles of programs that have not started yet (tlx.clc_create_context / producer / consumer)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def clc_affine(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """y = 3 * x - 1 by tiles of BLOCK; the tile loop asks for the next tile before working on
    the current one; owner[tile] records which program did the tile."""
    ctx = tlx.clc_create_context(1, STAGES)
    tile = tl.program_id(0)
    p_ask = 1
    p_get = 0
    k = 0
    while tile != -1:
        tlx.clc_producer(ctx, p_ask, k=0)
        p_ask ^= 1
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
        tl.store(owner_ptr + tile, tl.program_id(0))
        tile = tlx.clc_consumer(ctx, p_get, k=0)
        p_get ^= 1
        k += 1


@tlxc.kernel
def clc_affine_ws(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    """Two tasks consume each answer (num_consumers=2): the default task asks and stores
    y's first half of a tile, a one-warp-group task the second half."""
    ctx = tlx.clc_create_context(2, 1)
    HALF: tl.constexpr = BLOCK // 2
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tile = tl.program_id(0)
            p_ask = 1
            p_get = 0
            while tile != -1:
                tlx.clc_producer(ctx, p_ask)
                p_ask ^= 1
                offs = tile * BLOCK + tl.arange(0, HALF)
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
                tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
                tl.store(owner_ptr + tile, tl.program_id(0))
                tile = tlx.clc_consumer(ctx, p_get)
                p_get ^= 1
        with tlx.async_task(num_warps=4):
            tile = tl.program_id(0)
            p_get = 0
            while tile != -1:
                offs = tile * BLOCK + HALF + tl.arange(0, HALF)
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
                tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
                tile = tlx.clc_consumer(ctx, p_get)
                p_get ^= 1


@tlxc.kernel
def clc_affine_cluster(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    """Clusters of 2 CTAs: CTA 0 asks for the cluster (multicast answer), each CTA does tile
    (first CTA id of the cluster) + its rank; num_consumers counts both CTAs' consumers."""
    ctx = tlx.clc_create_context(2, 1)
    tile = tl.program_id(0)
    p_ask = 1
    p_get = 0
    while tile != -1:
        tlx.clc_producer(ctx, p_ask)
        p_ask ^= 1
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
        tl.store(owner_ptr + tile, tl.program_id(0))
        tile = tlx.clc_consumer(ctx, p_get)
        p_get ^= 1


@tlxc.kernel
def clc_affine_ws_miscounted(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    """clc_affine_ws with num_consumers=1 although two tasks consume each answer (a misuse
    tlxc check reports)."""
    ctx = tlx.clc_create_context(1, 1)
    HALF: tl.constexpr = BLOCK // 2
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tile = tl.program_id(0)
            p_ask = 1
            p_get = 0
            while tile != -1:
                tlx.clc_producer(ctx, p_ask)
                p_ask ^= 1
                offs = tile * BLOCK + tl.arange(0, HALF)
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
                tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
                tile = tlx.clc_consumer(ctx, p_get)
                p_get ^= 1
        with tlx.async_task(num_warps=4):
            tile = tl.program_id(0)
            p_get = 0
            while tile != -1:
                offs = tile * BLOCK + HALF + tl.arange(0, HALF)
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
                tl.store(y_ptr + offs, x * 3.0 - 1.0, mask=offs < n)
                tile = tlx.clc_consumer(ctx, p_get)
                p_get ^= 1
