"""``tlxc.ops.attention``: the public entry, as the custom op ``torch.ops.tlxc.attention``.

``torch.compile(fullgraph=True)`` sees one opaque op (shapes and strides from the fake
implementation, the launch at run time) and autograd differentiates it: the backward is
``torch.ops.tlxc.attention_backward``, a custom op too (so AOT autograd traces it), which
calls ``attention_bwd(do, q, k, v, o, lse, *, causal, sm_scale, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k[, window, softcap]) -> (dq, dk, dv)`` of ``tlxc/ops/kernels/attention_bwd.py``
(``dk``/``dv`` summed over the query heads of each GQA group; host code in
``tlxc/ops/attention_bwd.py``); without that module the backward raises ``NotImplementedError``.

    import tlxc.ops
    o = tlxc.ops.attention(q, k, v, causal=True)                  # [B, H, S, D], GQA allowed
    o = tlxc.ops.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m)
    o = tlxc.ops.attention(q, k, v, causal=True, window=(4095, 0), softcap=50.0)   # sliding window, capped

The ops carry the window as two ints (``window_left``, ``window_right``; -1 = unbounded) and the
cap as a float (0.0 = none): a custom op's schema has no optional tuples.
"""
from __future__ import annotations

import importlib
import math

import torch

from ..torch_ops import register_custom_op, traced
from .attention import (
    FP8_DTYPES,
    _fail,
    _out_like,
    attention_forward,
    check_args,
    check_fp8,
    check_scale,
    check_softcap,
    check_window,
)

BACKWARD_MODULE = "tlxc.ops.kernels.attention_bwd"


def _attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, cu_seqlens_q: torch.Tensor | None = None,
                    cu_seqlens_k: torch.Tensor | None = None, max_seqlen_q: int | None = None,
                    max_seqlen_k: int | None = None, window_left: int = -1, window_right: int = -1,
                    softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_forward(q, k, v, causal=causal, sm_scale=sm_scale, cu_seqlens_q=cu_seqlens_q,
                             cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                             window=(window_left, window_right), softcap=softcap or None)


def _attention_fake(q, k, v, causal=False, sm_scale=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                    max_seqlen_k=None, window_left=-1, window_right=-1, softcap=0.0):
    check_args(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    check_window((window_left, window_right), causal)
    check_softcap(softcap or None)
    if cu_seqlens_q is not None:                        # [total, H, D] -> o like q, lse [H, total]
        return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    B, H, S, _ = q.shape
    return _out_like(q), q.new_empty((B, H, S), dtype=torch.float32)


attention_op = register_custom_op("tlxc::attention", _attention_impl, fake=_attention_fake)


def _attention_fp8_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float | None,
                        cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None,
                        max_seqlen_q: int | None, max_seqlen_k: int | None, window_left: int, window_right: int,
                        softcap: float, q_descale: torch.Tensor | None, k_descale: torch.Tensor | None,
                        v_descale: torch.Tensor | None, out_dtype: torch.dtype | None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    return attention_forward(q, k, v, causal=causal, sm_scale=sm_scale, cu_seqlens_q=cu_seqlens_q,
                             cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                             window=(window_left, window_right), softcap=softcap or None, q_descale=q_descale,
                             k_descale=k_descale, v_descale=v_descale, out_dtype=out_dtype)


def _attention_fp8_fake(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                        window_left, window_right, softcap, q_descale, k_descale, v_descale, out_dtype):
    check_args(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    check_window((window_left, window_right), causal)
    check_softcap(softcap or None)
    o_dtype = check_fp8(q, (q_descale, k_descale, v_descale), out_dtype, k, cu_seqlens_q)
    if cu_seqlens_q is not None:                        # [total, H, D] -> o like q, lse [H, total]
        return q.new_empty(q.shape, dtype=o_dtype), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    B, H, S, _ = q.shape
    return _out_like(q, o_dtype), q.new_empty((B, H, S), dtype=torch.float32)


# fp8 inputs: the forward only (no autograd); descales as tensors (attention() makes numbers ones)
attention_fp8_op = register_custom_op("tlxc::attention_fp8", _attention_fp8_impl, fake=_attention_fp8_fake)


def _backward_impl(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, causal: bool, sm_scale: float, cu_seqlens_q: torch.Tensor | None = None,
                   cu_seqlens_k: torch.Tensor | None = None, max_seqlen_q: int | None = None,
                   max_seqlen_k: int | None = None, window_left: int = -1, window_right: int = -1,
                   softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    try:
        module = importlib.import_module(BACKWARD_MODULE)
    except ModuleNotFoundError as error:
        if error.name != BACKWARD_MODULE:
            raise
        raise NotImplementedError("tlxc.ops.attention: the backward kernel (tlxc/ops/kernels/attention_bwd.py) "
                                  "is not there yet; the forward works, gradients do not") from None
    extra = {}                               # (only when used: the default call as before)
    if (window_left, window_right) != (-1, -1):
        extra["window"] = (window_left, window_right)
    if softcap:
        extra["softcap"] = softcap
    grads = module.attention_bwd(do, q, k, v, o, lse, causal=causal, sm_scale=sm_scale, cu_seqlens_q=cu_seqlens_q,
                                 cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                                 **extra)
    out = []
    for g, x in zip(grads, (q, k, v)):        # the fake's layout (empty_like); a copy only if the kernel differs
        if g.shape != x.shape or g.dtype != x.dtype:
            raise RuntimeError(f"tlxc.ops.attention: attention_bwd returned a {tuple(g.shape)} {g.dtype} gradient "
                               f"for a {tuple(x.shape)} {x.dtype} input")
        # (g with x's strides: x is dense, so empty_like(x) has them too; no allocation to compare)
        same = g.stride() == x.stride() or g.stride() == torch.empty_like(x).stride()
        out.append(g if same and not _aliases(g, (q, k, v, o, do)) else torch.empty_like(x).copy_(g))
    return tuple(out)


def _aliases(g: torch.Tensor, inputs) -> bool:
    return any(x.untyped_storage().data_ptr() == g.untyped_storage().data_ptr() for x in inputs if x.numel())


def _backward_fake(do, q, k, v, o, lse, causal, sm_scale, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                   max_seqlen_k=None, window_left=-1, window_right=-1, softcap=0.0):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


attention_backward_op = register_custom_op("tlxc::attention_backward", _backward_impl, fake=_backward_fake)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, causal, sm_scale, cu_q, cu_k, max_q, max_k, win_left, win_right, softcap = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
    ctx.causal = causal
    ctx.masking = (win_left, win_right, softcap)
    ctx.sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    ctx.max_seqlen = (max_q, max_k)
    ctx.mark_non_differentiable(lse)


def _grads(ctx, do, backward):
    """The 12 inputs' gradients, ``backward`` being the backward op or its implementation."""
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    if not any(ctx.needs_input_grad[:3]):
        return (None,) * 12
    dq, dk, dv = backward(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale, cu_q, cu_k, *ctx.max_seqlen, *ctx.masking)
    return (dq if ctx.needs_input_grad[0] else None, dk if ctx.needs_input_grad[1] else None,
            dv if ctx.needs_input_grad[2] else None) + (None,) * 9


def _backward(ctx, do, _dlse):
    return _grads(ctx, do, attention_backward_op)


attention_op.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """Eager calls on plain tensors: the custom op's forward, context and backward without torch.library's
    dispatch and its autograd wrapper: a backward through autograd took 0.1-0.35 ms less host time on the
    H200's host this way (1.3-2.1 ms before; ``bench/attention_bwd_host_probe.py``, session 20), where the
    kernels of a short sequence take 0.3-1 ms.  Traced calls (``torch.compile``, fake tensors, a dispatch
    mode) take the op."""

    @staticmethod
    def forward(*inputs):
        return _attention_impl(*inputs)

    setup_context = staticmethod(_setup_context)

    @staticmethod
    def backward(ctx, do, _dlse):
        return _grads(ctx, do, _backward_impl)


def _eager(*tensors) -> bool:
    """Whether a call on ``tensors`` can bypass the custom op: nothing traces it (``torch_ops.traced``:
    plain tensors, no dispatch mode, not under Dynamo)."""
    return not traced(*tensors)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
              sm_scale: float | None = None, cu_seqlens_q: torch.Tensor | None = None,
              cu_seqlens_k: torch.Tensor | None = None, max_seqlen_q: int | None = None,
              max_seqlen_k: int | None = None, return_lse: bool = False, scale: float | None = None,
              window: tuple[int, int] | None = None, softcap: float | None = None, q_descale=None, k_descale=None,
              v_descale=None, out_dtype: torch.dtype | None = None):
    """Softmax attention ``softmax(q kᵀ · sm_scale) v`` (``tlxc/ops/attention.py`` for the
    layouts: dense ``[B, H, S, D]`` with GQA k/v ``[B, Hkv, S, D]``, or varlen
    ``[total, H, D]`` with int32 ``cu_seqlens_q/k``; ``causal`` top-left aligned as SDPA's;
    ``sm_scale`` (or SDPA's spelling ``scale``) default ``1/sqrt(D)``; ``window=(left, right)``
    a sliding window (flash-attn's ``window_size``, -1 unbounded); ``softcap`` Gemma 2's logit
    cap; head dims: multiples of 8 up to 256 (16 for fp8); bf16/fp16).
    Returns ``o``, or ``(o, lse)`` with ``return_lse=True`` (lse is not differentiable).
    Differentiable in q, k, v through ``torch.ops.tlxc.attention_backward``.
    fp8 inputs (float8_e4m3fn or float8_e5m2, dense or varlen; ``torch.ops.tlxc.attention_fp8``,
    forward only): ``q_descale``/``k_descale``/``v_descale`` (numbers, or float tensors of one element
    or of shape (batch, kv heads) as flash-attn 3's) and ``out_dtype`` (bfloat16 by default)."""
    if not isinstance(return_lse, bool):
        raise TypeError(f"tlxc.ops.attention: 'return_lse' must be a bool, got {type(return_lse).__name__}")
    if scale is not None:
        if sm_scale is not None:
            raise _fail(f"'scale' ({scale!r}) and 'sm_scale' ({sm_scale!r}) are one argument: give one")
        check_scale(scale, "scale")
        sm_scale = scale
    left, right = check_window(window, causal)
    cap = check_softcap(softcap)
    if isinstance(q, torch.Tensor) and q.dtype in FP8_DTYPES:
        descales = (q_descale, k_descale, v_descale)
        check_fp8(q, descales, out_dtype, k, cu_seqlens_q)
        descales = [d if d is None or isinstance(d, torch.Tensor)
                    else torch.full((), float(d), dtype=torch.float32, device=q.device) for d in descales]
        # eager calls on plain tensors skip the op's dispatch as the 16-bit ones do (it has no autograd:
        # inputs that require grad keep the op, whose backward refuses)
        eager = _eager(q, k, v, cu_seqlens_q, cu_seqlens_k, *descales) and \
            not (q.requires_grad or k.requires_grad or v.requires_grad)
        o, lse = (_attention_fp8_impl if eager else attention_fp8_op)(
            q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, left, right, cap,
            *descales, out_dtype)
        return (o, lse) if return_lse else o
    check_fp8(q, (q_descale, k_descale, v_descale), out_dtype)
    op = _EagerAttention.apply if _eager(q, k, v, cu_seqlens_q, cu_seqlens_k) else attention_op
    o, lse = op(q, k, v, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, left, right, cap)
    return (o, lse) if return_lse else o
