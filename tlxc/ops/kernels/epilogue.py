"""The fused GEMM epilogue, written once: every kernel of ``tlxc.ops`` applies it to its
float32 accumulator tile before the store.

``out = activation(acc * scale0 * scale1 + bias) + residual``, then the caller casts to
the output dtype.  The tile's two axes are ``0`` (rows of the kernel's C tile) and ``1``
(columns); a kernel that computes ``C^T`` (the small-M operand swap) passes the problem's
row vectors as axis-1 vectors, so nothing here knows about the swap.

Constexpr codes:

- ``SCALE0`` / ``SCALE1``: 0 none, 1 one float32 scalar (per-tensor), 2 a float32 vector
  along that axis (row-wise scales of A along rows, of B along columns);
- ``BIAS_DIM``: -1 none, 0 a vector along the rows, 1 along the columns (``nn.Linear``);
- ``ACTIVATION``: one of ``ACTIVATIONS`` (0 none);
- ``HAS_RESIDUAL``: add the residual tile ``res_ptr + offs0 * stride_r0 + offs1 * stride_r1``.
"""
from ... import language as tl
from ...runtime.jit import jit

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
SCALE_NONE, SCALE_TENSOR, SCALE_VECTOR = 0, 1, 2

_SQRT_HALF = 0.7071067811865476
_SQRT_2_OVER_PI = 0.7978845608028654


@jit
def activate(x, ACTIVATION: tl.constexpr):
    """``x`` (float32) through the activation coded ``ACTIVATION`` (see ``ACTIVATIONS``)."""
    if ACTIVATION == 1:
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == 2:                                       # exact GELU (torch's default)
        x = 0.5 * x * (1.0 + tl.erf(x * _SQRT_HALF))
    elif ACTIVATION == 3:                                       # GELU, tanh approximation
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        x = 0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))
    elif ACTIVATION == 4:                                       # SiLU
        x = x * tl.sigmoid(x)
    return x


@jit
def apply_epilogue(acc, offs0, offs1, mask0, mask1, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                   SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
                   HAS_RESIDUAL: tl.constexpr):
    """The epilogue of one float32 tile ``acc`` whose rows are ``offs0`` and columns ``offs1``
    (masks: in bounds); returns float32."""
    if SCALE0 == 1:
        acc = acc * tl.load(scale0_ptr)
    elif SCALE0 == 2:
        acc = acc * tl.load(scale0_ptr + offs0, mask=mask0, other=0.0)[:, None]
    if SCALE1 == 1:
        acc = acc * tl.load(scale1_ptr)
    elif SCALE1 == 2:
        acc = acc * tl.load(scale1_ptr + offs1, mask=mask1, other=0.0)[None, :]
    if BIAS_DIM == 0:
        acc = acc + tl.load(bias_ptr + offs0, mask=mask0, other=0.0).to(tl.float32)[:, None]
    elif BIAS_DIM == 1:
        acc = acc + tl.load(bias_ptr + offs1, mask=mask1, other=0.0).to(tl.float32)[None, :]
    acc = activate(acc, ACTIVATION)
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offs0[:, None] * stride_r0 + offs1[None, :] * stride_r1,
                      mask=mask0[:, None] & mask1[None, :], other=0.0)
        acc = acc + res.to(tl.float32)
    return acc
