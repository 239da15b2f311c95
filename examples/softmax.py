"""Fused row softmax: one program per row, the whole row in registers.

Reading each element once and writing it once is what makes it faster than
torch's unfused kernels: max, exponentials and sum happen on the row in
registers.  ``BLOCK`` is the next power of two ≥ the row length; the mask
covers the tail, whose lanes load ``-inf`` so they add ``exp(-inf) = 0``.

    python examples/softmax.py
    TLXC_INTERPRET=1 python examples/softmax.py
    tlxc compile examples/softmax.py --arch sm_90a --emit ir -D BLOCK=8192
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def softmax_kernel(out_ptr: tl.pointer_type(tl.bfloat16), in_ptr: tl.pointer_type(tl.bfloat16),
                   in_row_stride: tl.int32, out_row_stride: tl.int32, n_cols: tl.int32,
                   BLOCK: tl.constexpr = 1024):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x_max = tl.max(x, axis=0)
    numerator = tl.exp(x - x_max)
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator
    tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.bfloat16), mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.softmax(x, dim=-1)`` for a 2-D bfloat16 tensor whose rows are contiguous."""
    if x.dim() != 2 or x.dtype != torch.bfloat16 or x.stride(1) != 1:
        raise ValueError("softmax expects a 2-D bfloat16 tensor with contiguous rows")
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = next_power_of_2(n_cols)
    num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block, num_warps=num_warps)
    return out


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(1823, 781), (16384, 8192)] if on_gpu else [(7, 100), (3, 1000)]
    for n_rows, n_cols in shapes:
        x = torch.randn(n_rows, n_cols, device=device(), dtype=torch.bfloat16)
        out = softmax(x, poisoned_like(x))
        check(f"softmax {n_rows}x{n_cols}", out, torch.softmax(x.double(), dim=-1))
        if on_gpu:
            tlxc_ms = bench(partial(softmax, x, out))
            torch_ms = bench(partial(torch.softmax, x, dim=-1))
            report(f"softmax {n_rows}x{n_cols}", tlxc_ms, torch_ms, nbytes=2 * x.numel() * x.element_size())


if __name__ == "__main__":
    main()
