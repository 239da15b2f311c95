"""A tlxc kernel inside ``torch.compile(fullgraph=True)``: softmax as a torch custom op.

``torch.compile`` cannot trace into a tlxc launch, so the host function that
launches the kernel (``softmax`` from ``softmax.py``) becomes a
``torch.library`` custom op: Dynamo records one opaque call, computes shapes
with the *fake* implementation, and runs the real function at run time.  A
backward made of torch ops makes it trainable.  See ``docs/runtime.md``.

    python examples/custom_op.py
    TLXC_INTERPRET=1 python examples/custom_op.py      # CPU: interpreter, aot_eager backend
"""
from __future__ import annotations

import importlib.util
import os
import sys

import torch

import tlxc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax import softmax as launch_softmax  # the sibling example
from softmax import softmax_kernel  # noqa: F401  (so that `tlxc compile examples/custom_op.py` finds it)


def softmax_impl(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a bfloat16 tensor of any rank, by the tlxc kernel."""
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    return launch_softmax(rows).view(x.shape)


def softmax_fake(x: torch.Tensor) -> torch.Tensor:
    """Outputs of the real shapes, dtype, device and strides, without computing anything."""
    if x.dtype != torch.bfloat16:
        raise ValueError(f"tlxc_examples::softmax expects bfloat16, got {x.dtype}")
    return x.new_empty(x.shape)           # the real output is a fresh contiguous tensor


softmax = tlxc.register_custom_op("tlxc_examples::softmax", softmax_impl, fake=softmax_fake)


def _setup_backward(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)


def _backward(ctx, grad: torch.Tensor) -> torch.Tensor:
    (y,) = ctx.saved_tensors
    y32, g32 = y.float(), grad.float()
    return (y32 * (g32 - (g32 * y32).sum(-1, keepdim=True))).to(grad.dtype)


softmax.register_autograd(_backward, setup_context=_setup_backward)


class Attention(torch.nn.Module):
    """Single-head attention whose softmax is the tlxc kernel."""

    def __init__(self, dim: int):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.scale = dim ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return softmax(q @ k.transpose(-1, -2) * self.scale) @ v


def reference(model: Attention, x: torch.Tensor) -> torch.Tensor:
    q, k, v = model.qkv(x).double().chunk(3, dim=-1)
    return torch.softmax(q @ k.transpose(-1, -2) * model.scale, dim=-1) @ v


def compile_backend(on_gpu: bool) -> str:
    """Inductor where it can generate code (a GPU with Triton installed); else aot_eager,
    which needs no compiler and still traces the whole graph through the fake."""
    return "inductor" if on_gpu and importlib.util.find_spec("triton") is not None else "aot_eager"


def main() -> None:
    from _harness import check, device, setup

    on_gpu = setup()
    torch.manual_seed(0)
    batch, seq, dim = (4, 512, 128) if on_gpu else (1, 24, 16)
    model = Attention(dim).to(device=device(), dtype=torch.bfloat16)
    x = torch.randn(batch, seq, dim, device=device(), dtype=torch.bfloat16)
    backend = compile_backend(on_gpu)
    print(f"torch.compile(fullgraph=True, backend={backend!r})")
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    with torch.no_grad():
        out = compiled(x)
    check(f"compiled attention {batch}x{seq}x{dim}", out, reference(model, x), ulps=4)
    x.requires_grad_(True)
    compiled(x).float().square().sum().backward()
    print(f"  backward through the custom op: grad norm {x.grad.float().norm().item():.3f}")


if __name__ == "__main__":
    main()
