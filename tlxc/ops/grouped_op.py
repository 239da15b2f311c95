"""``torch.ops.tlxc.grouped_matmul``: the MoE grouped GEMM as a ``torch.library`` custom op, with
autograd.

``torch.compile(fullgraph=True)`` sees one opaque op (the fake gives the output's shape, the
launch runs at run time) and autograd differentiates it: the backward is two grouped
products, both custom ops so AOT autograd traces them too:

* ``da = grouped_matmul(dout, b_expertsᵀ, group_sizes)`` (the same op: ``b_experts.transpose(1, 2)``
  is read in place, e.g. the contiguous ``[E, N, K]`` weights of ``nn.Linear`` experts);
* ``db = torch.ops.tlxc.grouped_weight_grad(a, dout, group_sizes)``: ``a[rows of g]ᵀ @
  dout[rows of g]`` per expert, a reduction over each group's rows (``kernels/grouped_wgrad.py``).

With ``bias`` (``[E, N]`` or ``[N]``) and ``activation`` the epilogue's backward comes first: the
output gradient through the activation at the recomputed pre-activation (one more grouped
product, float32, without the activation), then ``dbias`` = the per-expert row sums of that
(``index_add`` over each row's expert, ``repeat_interleave`` of the sizes with the known total:
no host sync) or its column sums for a shared ``[N]`` bias.

``group_sizes`` is not differentiable; nothing syncs with the host.

    from tlxc.ops import grouped_matmul_op
    y = grouped_matmul_op(x, w.transpose(1, 2), sizes)       # w: [E, N, K], differentiable
    y = grouped_matmul_op(x, w_up.transpose(1, 2), sizes, None, b_up, "swiglu")   # [E, 2F] -> F columns
"""
from __future__ import annotations

import torch

from ..torch_ops import needs_custom_op, register_custom_op
from .custom_ops import _ACTIVATION_BACKWARD, _GLU_GATE, _glu_backward, refuse_on_the_op
from .grouped import grouped_matmul as grouped_matmul_eager
from .grouped import grouped_weight_grad
from .matmul import FP8_DTYPES


def _check(a, b_experts, group_sizes) -> None:
    if a.dim() != 2 or b_experts.dim() != 3 or a.shape[1] != b_experts.shape[1]:
        raise ValueError(f"tlxc::grouped_matmul expects a [total_M, K] and b_experts [E, K, N], got "
                         f"{tuple(a.shape)} and {tuple(b_experts.shape)}")
    if group_sizes.dim() != 1 or group_sizes.shape[0] != b_experts.shape[0]:
        raise ValueError(f"tlxc::grouped_matmul: 'group_sizes' must be a vector of {b_experts.shape[0]} elements, "
                         f"got shape {tuple(group_sizes.shape)}")


def _grouped_impl(a: torch.Tensor, b_experts: torch.Tensor, group_sizes: torch.Tensor,
                  out_dtype: torch.dtype | None = None, bias: torch.Tensor | None = None,
                  activation: str | None = None, scale_a: torch.Tensor | None = None,
                  scale_b: torch.Tensor | None = None, use_fast_accum: bool = True) -> torch.Tensor:
    return grouped_matmul_eager(a, b_experts, group_sizes, bias=bias, activation=activation, out_dtype=out_dtype,
                                scale_a=scale_a, scale_b=scale_b, use_fast_accum=use_fast_accum)


def _grouped_fake(a, b_experts, group_sizes, out_dtype=None, bias=None, activation=None, scale_a=None, scale_b=None,
                  use_fast_accum=True):
    _check(a, b_experts, group_sizes)
    n = b_experts.shape[2] // 2 if activation in _GLU_GATE else b_experts.shape[2]
    fp8 = a.dtype in FP8_DTYPES
    return a.new_empty((a.shape[0], n), dtype=out_dtype or (torch.bfloat16 if fp8 else a.dtype))


grouped_matmul_op = register_custom_op("tlxc::grouped_matmul", _grouped_impl, fake=_grouped_fake)


def grouped_matmul(a: torch.Tensor, b_experts: torch.Tensor, group_sizes: torch.Tensor,
                   out: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
                   activation: str | None = None, out_dtype: torch.dtype | None = None,
                   config: str | None = None, scale_a: torch.Tensor | None = None,
                   scale_b: torch.Tensor | None = None, use_fast_accum: bool = True) -> torch.Tensor:
    """``tlxc.ops.grouped_matmul`` (``ops/grouped.py:grouped_matmul`` for the arguments): the kernels
    directly, or through ``grouped_matmul_op`` where autograd must record the call (an input
    requires grad) or it is traced; ``out=`` and ``config=`` are then refused by name."""
    if not needs_custom_op(a, b_experts, group_sizes, out, bias, scale_a, scale_b):
        return grouped_matmul_eager(a, b_experts, group_sizes, out, bias=bias, activation=activation,
                                    out_dtype=out_dtype, config=config, scale_a=scale_a, scale_b=scale_b,
                                    use_fast_accum=use_fast_accum)
    refuse_on_the_op("tlxc.ops.grouped_matmul", out=out, config=config)
    return grouped_matmul_op(a, b_experts, group_sizes, out_dtype, bias, activation, scale_a, scale_b, use_fast_accum)


def _wgrad_impl(a: torch.Tensor, grad: torch.Tensor, group_sizes: torch.Tensor,
                out_dtype: torch.dtype | None = None) -> torch.Tensor:
    return grouped_weight_grad(a, grad, group_sizes, out_dtype)


def _wgrad_fake(a, grad, group_sizes, out_dtype=None):
    return a.new_empty((group_sizes.shape[0], a.shape[1], grad.shape[1]), dtype=out_dtype or a.dtype)


grouped_weight_grad_op = register_custom_op("tlxc::grouped_weight_grad", _wgrad_impl, fake=_wgrad_fake)


def _setup_context(ctx, inputs, output) -> None:
    a, b_experts, group_sizes, _out_dtype, bias, activation, scale_a, scale_b, _fast = inputs
    ctx.save_for_backward(a, b_experts, group_sizes, bias)
    ctx.activation = activation
    ctx.scaled = scale_a is not None or scale_b is not None


def _bias_grad(g: torch.Tensor, bias: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """The bias gradient from the pre-activation gradient ``g`` ([M, N] float32)."""
    if bias.dim() == 1:
        return g.sum(0).to(bias.dtype)
    experts = torch.arange(bias.shape[0], device=g.device)
    row_expert = torch.repeat_interleave(experts, group_sizes, output_size=g.shape[0])
    return torch.zeros(bias.shape, device=g.device, dtype=torch.float32).index_add_(0, row_expert, g).to(bias.dtype)


def _backward(ctx, grad):
    if ctx.scaled:
        raise NotImplementedError("tlxc.ops.grouped_matmul: no backward through scale_a / scale_b (the scaled, "
                                  "fp8 grouped product is forward-only, as torch._scaled_grouped_mm)")
    a, b_experts, group_sizes, bias = ctx.saved_tensors
    g = grad
    if ctx.activation is not None:            # through the activation at the recomputed pre-activation
        z = grouped_matmul_op(a, b_experts, group_sizes, torch.float32, bias)
        g = grad.float()
        g = _glu_backward(g, z, ctx.activation) if ctx.activation in _GLU_GATE else \
            _ACTIVATION_BACKWARD[ctx.activation](g, z)
    dbias = _bias_grad(g.float(), bias, group_sizes) if bias is not None and ctx.needs_input_grad[4] else None
    g = g.to(a.dtype)                         # (an out_dtype output: the operands' dtype for the products)
    da = db = None
    if ctx.needs_input_grad[0]:
        da = grouped_matmul_op(g, b_experts.transpose(1, 2), group_sizes)
    if ctx.needs_input_grad[1]:
        db = grouped_weight_grad_op(a, g, group_sizes, b_experts.dtype)
    return da, db, None, None, dbias, None, None, None, None


grouped_matmul_op.register_autograd(_backward, setup_context=_setup_context)
