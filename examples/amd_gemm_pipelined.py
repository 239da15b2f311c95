"""An LDS-pipelined MFMA GEMM for AMD gfx942 / gfx950: ``C = A @ B``, fp16 in, fp32 accumulation,
fp16 out.

Two LDS buffers per operand: while the MFMAs of K tile ``k`` run, the copies of tile ``k + 1`` are
in flight (``tlx.async_load``: direct-to-LDS ``global_load_lds_dwordx4`` on gfx950 when the rows
are 16-byte aligned, register-staged on gfx942, where the A buffer gets an LDS swizzle chosen
from its MFMA readers).  ``async_load_wait_group(1)`` plus the barrier the compiler adds after it
publishes tile ``k`` to every wave before its ``local_load``s read it straight into the MFMA
operand fragments.  ``examples/amd_gemm_pingpong.py`` adds warp-pipeline stages to the same idea.

    python examples/amd_gemm_pipelined.py          # CPU: the interpreter and the HIP emulation; AMD GPU: launch
    tlxc compile examples/amd_gemm_pipelined.py --arch gfx950 --emit hip,hsaco,amdgcn \\
        --signature 'N=i32:16,K=i32:16' -o out/      # (16-byte rows: direct-to-LDS)
"""
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx


@tlxc.kernel
def gemm_pipelined_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          BLOCK_M: tl.constexpr = 64, BLOCK_N: tl.constexpr = 64, BLOCK_K: tl.constexpr = 32):
    """A (M x K), B (K x N), C (M x N) row-major; one BLOCK_M x BLOCK_N tile of C per program."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    rm = (pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_buf = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, 2)
    b_buf = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, 2)
    k_tiles = tl.cdiv(K, BLOCK_K)
    tlx.async_load(a_ptr + rm[:, None] * K + rk[None, :], tlx.local_view(a_buf, 0),
                   mask=(rm[:, None] < M) & (rk[None, :] < K))
    tlx.async_load(b_ptr + rk[:, None] * N + rn[None, :], tlx.local_view(b_buf, 0),
                   mask=(rk[:, None] < K) & (rn[None, :] < N))
    tlx.async_load_commit_group()
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for t in range(k_tiles):
        kk = (t + 1) * BLOCK_K + rk                   # tile t + 1 (masked off past K)
        tlx.async_load(a_ptr + rm[:, None] * K + kk[None, :], tlx.local_view(a_buf, (t + 1) % 2),
                       mask=(rm[:, None] < M) & (kk[None, :] < K))
        tlx.async_load(b_ptr + kk[:, None] * N + rn[None, :], tlx.local_view(b_buf, (t + 1) % 2),
                       mask=(kk[:, None] < K) & (rn[None, :] < N))
        tlx.async_load_commit_group()
        tlx.async_load_wait_group(1)                  # tile t has landed
        a = tlx.local_load(tlx.local_view(a_buf, t % 2))
        b = tlx.local_load(tlx.local_view(b_buf, t % 2))
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def grid_of(M: int, N: int, block_m: int = 64, block_n: int = 64) -> tuple[int]:
    return (((M + block_m - 1) // block_m) * ((N + block_n - 1) // block_n),)


def check_inputs():
    """The launch 'tlxc compile' / 'tlxc check' specialize the kernel with."""
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
        c = poisoned_like(torch.empty(M, N, device="cuda", dtype=torch.float16))
        hip.launch(gemm_pipelined_kernel, grid_of(M, N), a.cuda(), b.cuda(), c, M, N, K)
        torch.cuda.synchronize()
        check(f"gemm_pipelined {M}x{N}x{K} on {hip.device_arch()}", c.cpu(), ref)
        return
    c = poisoned_like(torch.empty(M, N, dtype=torch.float16))
    interpret(gemm_pipelined_kernel, grid_of(M, N), (a, b, c, M, N, K), {}, arch="gfx942")
    check(f"gemm_pipelined {M}x{N}x{K} (interpreter, wave64)", c, ref)
    from tlxc.codegen_amdgcn.emu import run as emu
    if not emu.available():
        print("no host C++ compiler: the emulation of the generated HIP is skipped")
        return
    for arch in ("gfx942", "gfx950"):
        c = poisoned_like(torch.empty(M, N, dtype=torch.float16))
        hip.emulate(gemm_pipelined_kernel, grid_of(M, N), a, b, c, M, N, K, arch=arch)
        check(f"gemm_pipelined {M}x{N}x{K} (generated HIP for {arch}, CPU emulation)", c, ref)


if __name__ == "__main__":
    main()
