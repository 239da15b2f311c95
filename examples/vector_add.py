"""Vector addition: the smallest complete tlxc program.

    python examples/vector_add.py                      # GPU: check against torch, then time both
    TLXC_INTERPRET=1 python examples/vector_add.py     # no GPU: run under the CPU interpreter
    tlxc compile examples/vector_add.py --arch sm_90a --emit ir
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def add_kernel(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32),
               out_ptr: tl.pointer_type(tl.float32), n_elements: tl.int32, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements          # the last program may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None, *,
        block: int = 1024, num_warps: int = 4) -> torch.Tensor:
    """``x + y`` for two contiguous float32 tensors of one shape."""
    if x.shape != y.shape or not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError("add expects two contiguous tensors of one shape")
    if out is None:
        out = torch.empty_like(x)
    n = x.numel()

    def grid(meta):   # the grid may depend on the launch's meta-parameters
        return ((n + meta["BLOCK"] - 1) // meta["BLOCK"],)

    add_kernel[grid](x, y, out, n, BLOCK=block, num_warps=num_warps)
    return out


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    sizes = [98_432, 1 << 28] if on_gpu else [1000, 4099]   # not multiples of BLOCK: masks matter
    for n in sizes:
        x = torch.rand(n, device=device())
        y = torch.rand(n, device=device())
        out = add(x, y, poisoned_like(x))
        check(f"add n={n}", out, x.double() + y.double())
        if on_gpu:
            tlxc_ms = bench(partial(add, x, y, out))
            torch_ms = bench(partial(torch.add, x, y, out=out))
            report(f"add n={n}", tlxc_ms, torch_ms, nbytes=3 * n * x.element_size())


if __name__ == "__main__":
    main()
