"""``torch.ops.tlxc.matmul``: ``tlxc.ops.matmul`` as a ``torch.library`` custom op.

``torch.compile(fullgraph=True)`` sees one opaque op (shapes from the fake implementation,
the real launch at run time), and autograd differentiates it: the backward is two matmuls
(``grad_a = g @ b^T``, ``grad_b = a^T @ g``, both by this op, so they trace too; transposed
operands read in place) after the epilogue's own backward (``g`` is the output gradient
through the activation at the recomputed pre-activation; ``grad_bias = sum(g)``;
``grad_residual`` is the output gradient).  The fp8 scales are not differentiated (a
gradient that reaches them is an error).

    from tlxc.ops import matmul_op
    y = matmul_op(x, w.t(), bias=b, activation="gelu")        # torch.ops.tlxc.matmul
"""
from __future__ import annotations

import torch

from ..torch_ops import needs_custom_op, register_custom_op
from .matmul import FP8_DTYPES
from .matmul import matmul as matmul_eager

# d activation(z) / dz applied to g, by aten's backward ops (traceable, so the backward
# compiles too)
_ACTIVATION_BACKWARD = {
    "relu": lambda g, z: torch.ops.aten.threshold_backward(g, z, 0),
    "gelu": lambda g, z: torch.ops.aten.gelu_backward(g, z, approximate="none"),
    "gelu_tanh": lambda g, z: torch.ops.aten.gelu_backward(g, z, approximate="tanh"),
    "silu": lambda g, z: torch.ops.aten.silu_backward(g, z),
}
# GLU pairs (gate 2j, up 2j + 1): the gate's activation, forward and backward
_GLU_GATE = {"swiglu": (torch.nn.functional.silu, _ACTIVATION_BACKWARD["silu"]),
             "geglu": (torch.nn.functional.gelu, _ACTIVATION_BACKWARD["gelu"])}


def _glu_backward(g: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    """The gradient at the pre-activation ``z`` ([M, 2N]) of ``act(z[:, 0::2]) * z[:, 1::2]``."""
    forward, backward = _GLU_GATE[activation]
    gate, up = z[:, 0::2], z[:, 1::2]
    return torch.stack([backward(g * up, gate), g * forward(gate)], dim=-1).reshape(z.shape)


def _matmul_impl(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str | None = None,
                 out_dtype: torch.dtype | None = None, residual: torch.Tensor | None = None,
                 scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
                 use_fast_accum: bool = True) -> torch.Tensor:
    return matmul_eager(a, b, bias=bias, activation=activation, out_dtype=out_dtype, residual=residual,
                        scale_a=scale_a, scale_b=scale_b, use_fast_accum=use_fast_accum)


def _matmul_fake(a, b, bias=None, activation=None, out_dtype=None, residual=None, scale_a=None, scale_b=None,
                 use_fast_accum=True):
    if a.dim() < 2 or b.dim() != 2 or a.shape[-1] != b.shape[0]:
        raise ValueError(f"tlxc::matmul expects [..., K] @ [K, N], got {tuple(a.shape)} @ {tuple(b.shape)}")
    dtype = out_dtype or (torch.bfloat16 if a.dtype in FP8_DTYPES else a.dtype)
    n = b.shape[1] // 2 if activation in _GLU_GATE else b.shape[1]            # GLU: pairs of columns
    return a.new_empty(tuple(a.shape[:-1]) + (n,), dtype=dtype)     # fresh and contiguous, as matmul's


matmul_op = register_custom_op("tlxc::matmul", _matmul_impl, fake=_matmul_fake)


def refuse_on_the_op(op: str, **arguments) -> None:
    """Refuse, by name, an argument a call through the custom op cannot take (``out=``, ``config=``)."""
    for name, value in arguments.items():
        if value is not None:
            raise ValueError(f"{op}: '{name}=' applies to calls autograd does not record and nothing traces; here "
                             f"an input requires grad or the call is traced (torch.compile): leave '{name}' out, "
                             f"or call under torch.no_grad() with detached inputs")


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
           activation: str | None = None, out_dtype: torch.dtype | None = None,
           residual: torch.Tensor | None = None, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None, config: str | None = None,
           use_fast_accum: bool = True) -> torch.Tensor:
    """``tlxc.ops.matmul`` (``ops/matmul.py:matmul`` for the arguments): the kernels directly, or
    through ``matmul_op`` where autograd must record the call (an input requires grad) or it is
    traced (``torch.compile``, fake tensors), so gradients and compiled graphs see it as they see
    ``torch.matmul``.  ``out=`` and ``config=`` then have no meaning and are refused by name.
    A 1-D operand is read as ``torch.matmul`` reads it (``_vector_operands``)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and 1 in (a.dim(), b.dim()) and \
            min(a.dim(), b.dim()) >= 1:
        return _vector_operands(a, b, out, residual, lambda a2, b2, out2, res2: matmul(
            a2, b2, out2, bias=bias, activation=activation, out_dtype=out_dtype, residual=res2, scale_a=scale_a,
            scale_b=scale_b, config=config, use_fast_accum=use_fast_accum))
    if not needs_custom_op(a, b, out, bias, residual, scale_a, scale_b):
        return matmul_eager(a, b, out, bias=bias, activation=activation, out_dtype=out_dtype, residual=residual,
                            scale_a=scale_a, scale_b=scale_b, config=config, use_fast_accum=use_fast_accum)
    refuse_on_the_op("tlxc.ops.matmul", out=out, config=config)
    return matmul_op(a, b, bias=bias, activation=activation, out_dtype=out_dtype, residual=residual, scale_a=scale_a,
                     scale_b=scale_b, use_fast_accum=use_fast_accum)


def _vector_operands(a, b, out, residual, call):
    """``torch.matmul``'s 1-D operands: ``a`` of ``[K]`` is one row ``[1, K]`` and ``b`` of ``[K]`` one
    column ``[K, 1]``; the product's added dimension is dropped again, so ``[K] @ [K, N]`` is ``[N]``,
    ``[..., M, K] @ [K]`` is ``[..., M]`` and ``[K] @ [K]`` a 0-d tensor.  ``out`` and ``residual`` have
    that result's shape (views of them take the added dimension)."""
    if b.dim() > 2 or a.shape[-1] != b.shape[0]:
        raise ValueError(f"tlxc.ops.matmul expects [..., K] @ [K, N] (or 1-D operands, as torch.matmul), got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    def widened(t):
        if t is None or not isinstance(t, torch.Tensor):
            return t
        if b.dim() == 1:
            t = t.unsqueeze(-1)
        if a.dim() == 1:
            t = t.unsqueeze(-2)
        return t
    result = call(a.unsqueeze(0) if a.dim() == 1 else a, b.unsqueeze(1) if b.dim() == 1 else b, widened(out),
                  widened(residual))
    if a.dim() == 1:
        result = result.squeeze(-2)
    if b.dim() == 1:
        result = result.squeeze(-1)
    return out if out is not None else result


def _setup_context(ctx, inputs, output) -> None:
    a, b, bias, activation, _out_dtype, residual, scale_a, scale_b, use_fast_accum = inputs
    ctx.save_for_backward(a, b, bias, scale_a, scale_b)
    ctx.activation = activation
    ctx.use_fast_accum = use_fast_accum
    ctx.has_residual = residual is not None
    ctx.residual_dtype = residual.dtype if residual is not None else None


def _backward(ctx, grad):
    a, b, bias, scale_a, scale_b = ctx.saved_tensors
    if (scale_a is not None and ctx.needs_input_grad[6]) or (scale_b is not None and ctx.needs_input_grad[7]):
        raise RuntimeError("tlxc::matmul: the fp8 scales are not differentiable")
    if a.dtype in FP8_DTYPES and (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
        raise RuntimeError("tlxc::matmul: fp8 operands are not differentiable")
    lead = grad.shape[:-1]
    g = grad.reshape(-1, grad.shape[-1]).float()
    a2 = a.reshape(-1, a.shape[-1])
    if ctx.activation is not None:              # through the activation at the recomputed pre-activation
        z = matmul_op(a2, b, bias=bias, out_dtype=torch.float32, scale_a=scale_a, scale_b=scale_b,
                      use_fast_accum=ctx.use_fast_accum)
        if ctx.activation in _GLU_GATE:
            g = _glu_backward(g, z, ctx.activation)
        else:
            g = _ACTIVATION_BACKWARD[ctx.activation](g, z)
    grad_bias_of = g                            # the bias is added after the scales
    if scale_a is not None:                     # d(a @ b) = dz * scale_a (per row) * scale_b (per column)
        g = g * scale_a.reshape(-1, 1)
    if scale_b is not None:
        g = g * scale_b.reshape(1, -1)
    gz = g.to(a.dtype)
    grad_a = grad_b = grad_bias = grad_res = None
    if ctx.needs_input_grad[0]:
        grad_a = matmul_op(gz, b.t()).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        grad_b = matmul_op(a2.t(), gz)
    if bias is not None and ctx.needs_input_grad[2]:
        grad_bias = grad_bias_of.sum(0).to(bias.dtype)
    if ctx.has_residual and ctx.needs_input_grad[5]:
        grad_res = grad.reshape(*lead, grad.shape[-1]).to(ctx.residual_dtype)
    return grad_a, grad_b, grad_bias, None, None, grad_res, None, None, None


matmul_op.register_autograd(_backward, setup_context=_setup_context)
