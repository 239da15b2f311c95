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

GLU activations (``swiglu``, ``geglu``: codes >= ``GLU_FIRST``) pair the product's columns
(2j, 2j + 1): ``out[:, j] = act(y[:, 2j]) * y[:, 2j + 1]`` with ``y`` the product after the
scales and the bias (SiLU for swiglu, exact GELU for geglu); the output has half the
product's columns and the residual is added to it.  ``store_tile_pointers`` does it for the pointer
stores of every kernel (``GLU_AXIS``: the tile axis the product's columns run along, 0 in
the swapped C^T kernel).
"""
from ... import language as tl
from ...runtime.jit import jit

ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "swiglu": 5, "geglu": 6}
GLU_FIRST = 5                    # codes from here on are GLU pairs
GLU_GATE = {5: 4, 6: 2}          # the activation of the gate column
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
    if ACTIVATION < 5:
        acc = activate(acc, ACTIVATION)
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offs0[:, None] * stride_r0 + offs1[None, :] * stride_r1,
                      mask=mask0[:, None] & mask1[None, :], other=0.0)
        acc = acc + res.to(tl.float32)
    return acc


@jit
def glu_pairs(acc, ACTIVATION: tl.constexpr, AXIS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """``act(gate) * up`` of the (gate, up) pairs of adjacent entries along ``AXIS`` of the
    ``ROWS x COLS`` tile: half the tile along that axis."""
    if AXIS == 1:
        gate, up = tl.split(tl.reshape(acc, (ROWS, COLS // 2, 2)))
    else:
        gate, up = tl.split(tl.permute(tl.reshape(acc, (ROWS // 2, 2, COLS)), (0, 2, 1)))
    if ACTIVATION == 5:
        gate = activate(gate, 4)                 # swiglu: SiLU(gate) * up
    else:
        gate = activate(gate, 2)                 # geglu: GELU(gate) * up
    return gate * up


@jit
def store_tile_pointers(acc, row0, col0, M, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
               stride_r0, stride_r1, ROWS: tl.constexpr, COLS: tl.constexpr, SCALE0: tl.constexpr,
               SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
               HAS_RESIDUAL: tl.constexpr, GLU_AXIS: tl.constexpr):
    """The epilogue of the float32 ``ROWS x COLS`` tile at (row0, col0) of the ``M x N``
    product, stored through pointers (masked) into ``c``; with a GLU activation the pairs
    along ``GLU_AXIS`` make a tile half as large there, stored at half the coordinates."""
    offs0 = row0 + tl.arange(0, ROWS)
    offs1 = col0 + tl.arange(0, COLS)
    mask0 = offs0 < M
    mask1 = offs1 < N
    if ACTIVATION < 5:
        acc = apply_epilogue(acc, offs0, offs1, mask0, mask1, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                             stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
        tl.store(c_ptr + offs0.to(tl.int64)[:, None] * stride_cm + offs1[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty), mask=mask0[:, None] & mask1[None, :])
    else:
        acc = apply_epilogue(acc, offs0, offs1, mask0, mask1, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                             stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, False)
        acc = glu_pairs(acc, ACTIVATION, GLU_AXIS, ROWS, COLS)
        if GLU_AXIS == 1:
            offs0 = row0 + tl.arange(0, ROWS)
            offs1 = col0 // 2 + tl.arange(0, COLS // 2)
            mask0 = offs0 < M
            mask1 = offs1 < N // 2
        else:
            offs0 = row0 // 2 + tl.arange(0, ROWS // 2)
            offs1 = col0 + tl.arange(0, COLS)
            mask0 = offs0 < M // 2
            mask1 = offs1 < N
        mask = mask0[:, None] & mask1[None, :]
        if HAS_RESIDUAL:
            res = tl.load(res_ptr + offs0[:, None] * stride_r0 + offs1[None, :] * stride_r1, mask=mask, other=0.0)
            acc = acc + res.to(tl.float32)
        tl.store(c_ptr + offs0.to(tl.int64)[:, None] * stride_cm + offs1[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty), mask=mask)
