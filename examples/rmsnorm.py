"""RMSNorm forward: ``y = x / sqrt(mean(x²) + eps) * weight``, one program per row.

bfloat16 in and out; the sum of squares and the scaling run in float32.

    python examples/rmsnorm.py
    TLXC_INTERPRET=1 python examples/rmsnorm.py
    tlxc compile examples/rmsnorm.py --arch sm_90a --emit ir
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def rmsnorm_kernel(out_ptr: tl.pointer_type(tl.bfloat16), x_ptr: tl.pointer_type(tl.bfloat16),
                   weight_ptr: tl.pointer_type(tl.bfloat16), x_row_stride: tl.int32, out_row_stride: tl.int32,
                   n_cols: tl.int32, eps: tl.float32, BLOCK: tl.constexpr = 1024):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / n_cols
    rstd = tl.rsqrt(mean_square + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * weight
    tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.bfloat16), mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.nn.functional.rms_norm(x, (n,), weight, eps)`` for a 2-D bfloat16 ``x`` of ``n`` columns."""
    if x.dim() != 2 or x.dtype != torch.bfloat16 or x.stride(1) != 1:
        raise ValueError("rmsnorm expects a 2-D bfloat16 tensor with contiguous rows")
    if weight.shape != (x.shape[1],) or weight.dtype != torch.bfloat16 or not weight.is_contiguous():
        raise ValueError("rmsnorm expects a contiguous bfloat16 weight with one element per column")
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = next_power_of_2(n_cols)
    num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    rmsnorm_kernel[(n_rows,)](out, x, weight, x.stride(0), out.stride(0), n_cols, eps,
                              BLOCK=block, num_warps=num_warps)
    return out


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(1823, 781), (16384, 8192)] if on_gpu else [(7, 100), (3, 1000)]
    eps = 1e-6
    for n_rows, n_cols in shapes:
        x = torch.randn(n_rows, n_cols, device=device(), dtype=torch.bfloat16)
        weight = torch.rand(n_cols, device=device(), dtype=torch.bfloat16) + 0.5
        out = rmsnorm(x, weight, eps, out=poisoned_like(x))
        check(f"rmsnorm {n_rows}x{n_cols}", out, reference(x, weight, eps))
        if on_gpu:
            tlxc_ms = bench(partial(rmsnorm, x, weight, eps, out=out))
            torch_ms = bench(partial(torch.nn.functional.rms_norm, x, (n_cols,), weight, eps))
            report(f"rmsnorm {n_rows}x{n_cols}", tlxc_ms, torch_ms, nbytes=2 * x.numel() * x.element_size())


if __name__ == "__main__":
    main()
