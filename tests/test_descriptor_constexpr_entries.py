"""``tl.make_tensor_descriptor(..., strides=[tl.constexpr(1)])``: Triton code wraps list entries in
``tl.constexpr``; they count as the numbers they hold (a copy through the descriptor checks it)."""
from __future__ import annotations

import torch

import tlxc
import tlxc.language as tl

F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def copy_boxes(x_ptr: F32, y_ptr: F32, n: tl.int32, BLOCK: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, shape=[n], strides=[tl.constexpr(1)], block_shape=[tl.constexpr(BLOCK)])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[n], strides=[tl.constexpr(1)], block_shape=[BLOCK])
    start = tl.program_id(0) * BLOCK
    dst.store([start], src.load([start]) + 1.0)


def test_constexpr_entries_in_descriptor_lists():
    n = 100                                       # the last box overhangs the tensor
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    tlxc.interpret(copy_boxes)[(4,)](x, y, n, BLOCK=32)
    assert torch.equal(y, x + 1.0)
    assert copy_boxes.compile(constexprs={"BLOCK": 32}, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"
