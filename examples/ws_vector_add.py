"""Warp specialization "hello world": two independent vector adds, one per
warp-group task (TLX's ``vector-add2``).

The default task (the kernel's ``num_warps``) computes ``x + y`` while a second
task of 4 more warps computes ``a + b``; the two run side by side in one CTA.

    python examples/ws_vector_add.py
    TLXC_INTERPRET=1 python examples/ws_vector_add.py
"""
from __future__ import annotations

import torch

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def add2_kernel(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32),
                out1_ptr: tl.pointer_type(tl.float32), a_ptr: tl.pointer_type(tl.float32),
                b_ptr: tl.pointer_type(tl.float32), out2_ptr: tl.pointer_type(tl.float32),
                n: tl.int32, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            y = tl.load(y_ptr + offs, mask=mask)
            tl.store(out1_ptr + offs, x + y, mask=mask)
        with tlx.async_task(num_warps=4):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            a = tl.load(a_ptr + offs, mask=mask)
            b = tl.load(b_ptr + offs, mask=mask)
            tl.store(out2_ptr + offs, a + b, mask=mask)


def add2(x, y, a, b, out1=None, out2=None, *, block: int = 1024):
    out1 = torch.empty_like(x) if out1 is None else out1
    out2 = torch.empty_like(a) if out2 is None else out2
    n = x.numel()
    add2_kernel[(triton_cdiv(n, block),)](x, y, out1, a, b, out2, n, BLOCK=block, num_warps=4)
    return out1, out2


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def main() -> None:
    from _harness import check, device, poisoned_like, setup
    setup()
    for n in (1000, 98_432):
        x, y, a, b = (torch.randn(n, device=device()) for _ in range(4))
        out1, out2 = add2(x, y, a, b, poisoned_like(x), poisoned_like(a))
        check(f"ws add x+y n={n}", out1, x.double() + y.double())
        check(f"ws add a+b n={n}", out2, a.double() + b.double())


if __name__ == "__main__":
    main()
