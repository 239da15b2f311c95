"""A persistent matmul written as one flat loop over (tile, k-step) pairs, as Triton's
persistent tutorial does it: the K index wraps with tl.where and the tile's offsets are recomputed
under `if kk == 0:`, the tile is stored under `if kk == k_steps - 1:` (tests of the run-ahead
mode of pipeline-loads)."""
import tlxc
import tlxc.language as tl


@tlxc.jit
def flat_persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_bk, s_cm,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PROGRAMS: tl.constexpr):
    """One loop over (tile, k-step) pairs of this program, tiles in row-major order."""
    first = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    k_steps = tl.cdiv(K, BK)
    mine = tiles // PROGRAMS + (first < tiles % PROGRAMS)
    tile = first - PROGRAMS
    kk = -1
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(0, k_steps * mine):
        kk = tl.where(kk == k_steps - 1, 0, kk + 1)
        if kk == 0:
            tile += PROGRAMS
            rows = (tile // tiles_n) * BM + tl.arange(0, BM)
            cols = (tile % tiles_n) * BN + tl.arange(0, BN)
            rows = tl.where(rows < M, rows, 0)
            cols = tl.where(cols < N, cols, 0)
        offs_k = kk * BK + ks
        a = tl.load(a_ptr + rows[:, None] * s_am + offs_k[None, :], mask=ks[None, :] < K - kk * BK, other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * s_bk + cols[None, :], mask=ks[:, None] < K - kk * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        if kk == k_steps - 1:
            out_rows = (tile // tiles_n) * BM + tl.arange(0, BM)
            out_cols = (tile % tiles_n) * BN + tl.arange(0, BN)
            mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
            tl.store(c_ptr + out_rows[:, None] * s_cm + out_cols[None, :], acc.to(tl.float16), mask=mask)
            acc = tl.zeros((BM, BN), tl.float32)
