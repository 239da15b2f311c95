"""``torch.ops.tlxc.grouped_matmul``: the MoE grouped GEMM as a ``torch.library`` custom op, with
autograd.

``torch.compile(fullgraph=True)`` sees one opaque op (the fake gives the output's shape, the
launch runs at run time) and autograd differentiates it: the backward is two grouped
products, both custom ops so AOT autograd traces them too:

* ``da = grouped_matmul(dout, b_expertsᵀ, group_sizes)`` (the same op: ``b_experts.transpose(1, 2)``
  is read in place, e.g. the contiguous ``[E, N, K]`` weights of ``nn.Linear`` experts);
* ``db = torch.ops.tlxc.grouped_weight_grad(a, dout, group_sizes)``: ``a[rows of g]ᵀ @
  dout[rows of g]`` per expert, a reduction over each group's rows (``kernels/grouped_wgrad.py``).

``group_sizes`` is not differentiable; nothing syncs with the host.

    from tlxc.ops import grouped_matmul_op
    y = grouped_matmul_op(x, w.transpose(1, 2), sizes)       # w: [E, N, K], differentiable
"""
from __future__ import annotations

import torch

from ..torch_ops import register_custom_op
from .grouped import grouped_matmul, grouped_weight_grad


def _check(a, b_experts, group_sizes) -> None:
    if a.dim() != 2 or b_experts.dim() != 3 or a.shape[1] != b_experts.shape[1]:
        raise ValueError(f"tlxc::grouped_matmul expects a [total_M, K] and b_experts [E, K, N], got "
                         f"{tuple(a.shape)} and {tuple(b_experts.shape)}")
    if group_sizes.dim() != 1 or group_sizes.shape[0] != b_experts.shape[0]:
        raise ValueError(f"tlxc::grouped_matmul: 'group_sizes' must be a vector of {b_experts.shape[0]} elements, "
                         f"got shape {tuple(group_sizes.shape)}")


def _grouped_impl(a: torch.Tensor, b_experts: torch.Tensor, group_sizes: torch.Tensor,
                  out_dtype: torch.dtype | None = None) -> torch.Tensor:
    return grouped_matmul(a, b_experts, group_sizes, out_dtype=out_dtype)


def _grouped_fake(a, b_experts, group_sizes, out_dtype=None):
    _check(a, b_experts, group_sizes)
    return a.new_empty((a.shape[0], b_experts.shape[2]), dtype=out_dtype or a.dtype)


grouped_matmul_op = register_custom_op("tlxc::grouped_matmul", _grouped_impl, fake=_grouped_fake)


def _wgrad_impl(a: torch.Tensor, grad: torch.Tensor, group_sizes: torch.Tensor,
                out_dtype: torch.dtype | None = None) -> torch.Tensor:
    return grouped_weight_grad(a, grad, group_sizes, out_dtype)


def _wgrad_fake(a, grad, group_sizes, out_dtype=None):
    return a.new_empty((group_sizes.shape[0], a.shape[1], grad.shape[1]), dtype=out_dtype or a.dtype)


grouped_weight_grad_op = register_custom_op("tlxc::grouped_weight_grad", _wgrad_impl, fake=_wgrad_fake)


def _setup_context(ctx, inputs, output) -> None:
    a, b_experts, group_sizes, _out_dtype = inputs
    ctx.save_for_backward(a, b_experts, group_sizes)


def _backward(ctx, grad):
    a, b_experts, group_sizes = ctx.saved_tensors
    grad = grad.to(a.dtype)                   # (an out_dtype output: the operands' dtype for the products)
    da = db = None
    if ctx.needs_input_grad[0]:
        da = grouped_matmul_op(grad, b_experts.transpose(1, 2), group_sizes)
    if ctx.needs_input_grad[1]:
        db = grouped_weight_grad_op(a, grad, group_sizes, b_experts.dtype)
    return da, db, None, None


grouped_matmul_op.register_autograd(_backward, setup_context=_setup_context)
