"""A ping-pong (warp-pipelined) MFMA GEMM for AMD gfx942 / gfx950: ``C = A @ B``, fp16 in, fp32
accumulation, fp16 out.

The work-group's waves run as two groups one stage apart (``tlx.warp_pipeline_stage``): while one
group reads its next tiles from LDS (stage "lds", higher priority), the other runs its MFMAs and
issues the copies of a later tile (stage "mfma").  The tiles pass through a ring of three LDS
buffers filled by ``tlx.async_load`` (direct-to-LDS ``global_load_lds_dwordx4`` on gfx950 when
the rows are 16-byte aligned, register-staged on gfx942).  Stage by stage, in program order
(stage 2t is "lds" of iteration t, 2t + 1 its "mfma"):

* tile t + 2 is issued in stage 2t + 1 into buffer (t + 2) % 3, whose last reader (tile t - 1)
  was stage 2t - 2;
* each wave waits for its own copies of tile t + 1 in stage 2t; every wave reads tile t + 1 in
  stage 2t + 2.

With the groups one stage apart, a stage-end barrier orders an access of one group before an
access of the other only two stages later (docs/codegen.md, "Warp-pipeline stages"); every
cross-wave dependency above is at least two stages apart.  The CPU emulation of the generated HIP
runs the leading group's stage first after each barrier and lands direct-to-LDS copies only at the
wait, so a schedule that broke this rule would read stale or NaN data there.

    python examples/amd_gemm_pingpong.py          # CPU: the interpreter and the HIP emulation; AMD GPU: launch
    tlxc compile examples/amd_gemm_pingpong.py --arch gfx950 --emit hip,hsaco,amdgcn \\
        --signature 'N=i32:16,K=i32:16' -o out/      # (16-byte rows: direct-to-LDS)
"""
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx


@tlxc.kernel
def gemm_pingpong_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                         BLOCK_M: tl.constexpr = 64, BLOCK_N: tl.constexpr = 64, BLOCK_K: tl.constexpr = 32):
    """A (M x K), B (K x N), C (M x N) row-major; one BLOCK_M x BLOCK_N tile of C per program."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    rm = (pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_buf = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, 3)
    b_buf = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, 3)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for i in tl.static_range(2):                       # prologue: tiles 0 and 1 in flight
        kk = i * BLOCK_K + rk
        tlx.async_load(a_ptr + rm[:, None] * K + kk[None, :], tlx.local_view(a_buf, i),
                       mask=(rm[:, None] < M) & (kk[None, :] < K))
        tlx.async_load(b_ptr + kk[:, None] * N + rn[None, :], tlx.local_view(b_buf, i),
                       mask=(kk[:, None] < K) & (rn[None, :] < N))
        tlx.async_load_commit_group()
    tlx.async_load_wait_group(1)                       # tile 0 has landed (the loop's entry barrier publishes it)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for t in range(k_tiles):
        with tlx.warp_pipeline_stage("lds", priority=1):
            tlx.async_load_wait_group(0)               # this wave's copies of tile t + 1 (read two stages on)
            a = tlx.local_load(tlx.local_view(a_buf, t % 3))
            b = tlx.local_load(tlx.local_view(b_buf, t % 3))
        with tlx.warp_pipeline_stage("mfma", priority=0):
            kk = (t + 2) * BLOCK_K + rk
            tlx.async_load(a_ptr + rm[:, None] * K + kk[None, :], tlx.local_view(a_buf, (t + 2) % 3),
                           mask=(rm[:, None] < M) & (kk[None, :] < K))
            tlx.async_load(b_ptr + kk[:, None] * N + rn[None, :], tlx.local_view(b_buf, (t + 2) % 3),
                           mask=(kk[:, None] < K) & (rn[None, :] < N))
            tlx.async_load_commit_group()
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def grid_of(M: int, N: int, block_m: int = 64, block_n: int = 64) -> tuple[int]:
    return (((M + block_m - 1) // block_m) * ((N + block_n - 1) // block_n),)


def check_inputs():
    """The launch 'tlxc compile' / 'tlxc check' specialize the kernel with (K, N multiples of 16:
    16-byte rows, so gfx950 copies straight to LDS)."""
    M, N, K = 100, 96, 160
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    return grid_of(M, N), (a, b, torch.empty(M, N, dtype=torch.float16), M, N, K)


def main() -> None:
    from _harness import check, poisoned_like

    from tlxc.interpreter import interpret
    from tlxc.runtime import hip

    M, N, K = 100, 96, 160                 # not multiples of the 64 x 64 x 32 tile
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    ref = a.double() @ b.double()
    if getattr(torch.version, "hip", None) and torch.cuda.is_available():        # an AMD GPU (unverified path)
        ag, bg = a.cuda(), b.cuda()
        c = poisoned_like(torch.empty(M, N, device="cuda", dtype=torch.float16))
        hip.launch(gemm_pingpong_kernel, grid_of(M, N), ag, bg, c, M, N, K)
        torch.cuda.synchronize()
        check(f"gemm_pingpong {M}x{N}x{K} on {hip.device_arch()}", c.cpu(), ref)
        return
    c = poisoned_like(torch.empty(M, N, dtype=torch.float16))
    interpret(gemm_pingpong_kernel, grid_of(M, N), (a, b, c, M, N, K), {}, arch="gfx950")
    check(f"gemm_pingpong {M}x{N}x{K} (interpreter, wave64)", c, ref)
    from tlxc.codegen_amdgcn.emu import run as emu
    if not emu.available():
        print("no host C++ compiler: the emulation of the generated HIP is skipped")
        return
    for arch in ("gfx942", "gfx950"):
        c = poisoned_like(torch.empty(M, N, dtype=torch.float16))
        hip.emulate(gemm_pingpong_kernel, grid_of(M, N), a, b, c, M, N, K, arch=arch)
        check(f"gemm_pingpong {M}x{N}x{K} (generated HIP for {arch}, CPU emulation)", c, ref)


if __name__ == "__main__":
    main()
