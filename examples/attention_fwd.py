"""FlashAttention forward in ``tl.*`` only (one program per block of queries, online softmax in
fp32, both products on the tensor cores): arch-neutral, so the same kernel compiles for NVIDIA
(``mma.sync``) and AMD (MFMA on gfx942 / gfx950).  ``flash_attention_fwd.py`` is the Hopper TLX
version (TMA, wgmma, warp specialization).

Q, K, V, O are ``[batch * heads, seq, D]`` fp16, contiguous.

    python examples/attention_fwd.py
    tlxc compile examples/attention_fwd.py --arch gfx950 --emit hip,hsaco -o out/
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S: tl.int32, scale: tl.float32,
                         BLOCK_M: tl.constexpr = 64, BLOCK_N: tl.constexpr = 32, D: tl.constexpr = 64):
    bh = tl.program_id(1)
    base = bh * S * D
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    qk_scale = scale * 1.4426950408889634             # exp(x) = exp2(x log2 e)
    for start in range(0, S, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + base + rn[None, :] * D + rd[:, None], mask=rn[None, :] < S, other=0.0)
        s = tl.dot(q, kt) * qk_scale
        s = tl.where(rn[None, :] < S, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16), mask=rm[:, None] < S)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor | None = None, *,
              block_m: int = 64, block_n: int = 32, num_warps: int = 4) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for ``[B, H, S, D]`` (or ``[BH, S, D]``) fp16 tensors."""
    shape = q.shape
    q3, k3, v3 = (t.reshape(-1, shape[-2], shape[-1]).contiguous() for t in (q, k, v))
    out = torch.empty_like(q3) if out is None else out.reshape(q3.shape)
    S, D = shape[-2], shape[-1]
    grid = ((S + block_m - 1) // block_m, q3.shape[0])
    attention_fwd_kernel[grid](q3, k3, v3, out, S, D ** -0.5, BLOCK_M=block_m, BLOCK_N=block_n, D=D,
                               num_warps=num_warps)
    return out.reshape(shape)


def reference(q, k, v):
    scale = q.shape[-1] ** -0.5
    return torch.softmax((q.double() @ k.double().transpose(-1, -2)) * scale, dim=-1) @ v.double()


def check_inputs():
    q, k, v = (torch.randn(2, 100, 64, dtype=torch.float16) for _ in range(3))
    return (2, 2), (q, k, v, torch.empty_like(q), 100, 0.125)


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(4, 16, 4096, 64)] if on_gpu else [(1, 2, 100, 64)]
    for b, h, s, d in shapes:
        q, k, v = (torch.randn(b, h, s, d, device=device(), dtype=torch.float16) for _ in range(3))
        out = attention(q, k, v, poisoned_like(q))
        check(f"attention_fwd {b}x{h}x{s}x{d}", out, reference(q, k, v), ulps=4.0)
        if on_gpu:
            tlxc_ms = bench(partial(attention, q, k, v, out))
            torch_ms = bench(partial(torch.nn.functional.scaled_dot_product_attention, q, k, v))
            report(f"attention_fwd {b}x{h}x{s}x{d}", tlxc_ms, torch_ms, flops=4 * b * h * s * s * d)


if __name__ == "__main__":
    main()
