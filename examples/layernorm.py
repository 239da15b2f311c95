"""LayerNorm forward: ``y = (x - mean) / sqrt(var + eps) * weight + bias``, one program per row.

bfloat16 in and out; mean, variance and the affine map run in float32.  The
variance is taken over the centred row (two passes over registers, not
``E[x²] - E[x]²``) so that rows with a large mean keep their precision.

    python examples/layernorm.py
    TLXC_INTERPRET=1 python examples/layernorm.py
    tlxc compile examples/layernorm.py --arch sm_90a --emit ir
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def layernorm_kernel(out_ptr: tl.pointer_type(tl.bfloat16), x_ptr: tl.pointer_type(tl.bfloat16),
                     weight_ptr: tl.pointer_type(tl.bfloat16), bias_ptr: tl.pointer_type(tl.bfloat16),
                     x_row_stride: tl.int32, out_row_stride: tl.int32, n_cols: tl.int32, eps: tl.float32,
                     BLOCK: tl.constexpr = 1024):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(mask, x - mean, 0.0)     # masked-off lanes must not add (0 - mean)²
    variance = tl.sum(centred * centred, axis=0) / n_cols
    rstd = tl.rsqrt(variance + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centred * rstd * weight + bias
    tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.bfloat16), mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.nn.functional.layer_norm(x, (n,), weight, bias, eps)`` for a 2-D bfloat16 ``x`` of ``n`` columns."""
    if x.dim() != 2 or x.dtype != torch.bfloat16 or x.stride(1) != 1:
        raise ValueError("layernorm expects a 2-D bfloat16 tensor with contiguous rows")
    for name, t in (("weight", weight), ("bias", bias)):
        if t.shape != (x.shape[1],) or t.dtype != torch.bfloat16 or not t.is_contiguous():
            raise ValueError(f"layernorm expects a contiguous bfloat16 {name} with one element per column")
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = next_power_of_2(n_cols)
    num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    layernorm_kernel[(n_rows,)](out, x, weight, bias, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=num_warps)
    return out


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x.double(), (x.shape[1],), weight.double(), bias.double(), eps)


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(1823, 781), (16384, 8192)] if on_gpu else [(7, 100), (3, 1000)]
    eps = 1e-5
    for n_rows, n_cols in shapes:
        x = (torch.randn(n_rows, n_cols, device=device()) * 2 + 1).to(torch.bfloat16)
        weight = torch.rand(n_cols, device=device(), dtype=torch.bfloat16) + 0.5
        bias = torch.randn(n_cols, device=device(), dtype=torch.bfloat16)
        out = layernorm(x, weight, bias, eps, out=poisoned_like(x))
        check(f"layernorm {n_rows}x{n_cols}", out, reference(x, weight, bias, eps))
        if on_gpu:
            tlxc_ms = bench(partial(layernorm, x, weight, bias, eps, out=out))
            torch_ms = bench(partial(torch.nn.functional.layer_norm, x, (n_cols,), weight, bias, eps))
            report(f"layernorm {n_rows}x{n_cols}", tlxc_ms, torch_ms, nbytes=2 * x.numel() * x.element_size())


if __name__ == "__main__":
    main()
