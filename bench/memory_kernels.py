"""Plain-Triton memory-bound kernels (written for this project, in the style of Triton's
tutorials and Liger-Kernel's row kernels): bench/triton_memory_bench.py compiles this one
source with tlxc and, with its import lines swapped, with Triton."""
import tlxc
import tlxc.language as tl
from tlxc.language.extra import libdevice


@tlxc.jit
def add_1d(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=keep) + tl.load(y_ptr + offs, mask=keep), mask=keep)


@tlxc.jit
def silu_gate_rows(a_ptr, b_ptr, c_ptr, row_stride, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    """c = silu(a) * b per row, silu in fp32 (a SwiGLU forward)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    a = tl.load(a_ptr + row * row_stride + cols, mask=keep, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * row_stride + cols, mask=keep, other=0)
    tl.store(c_ptr + row * row_stride + cols, a * tl.sigmoid(a) * b, mask=keep)


@tlxc.jit
def gelu_gate_rows(a_ptr, b_ptr, c_ptr, row_stride, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    """c = gelu_tanh(a) * b per row (a GeGLU forward)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    a = tl.load(a_ptr + row * row_stride + cols, mask=keep, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * row_stride + cols, mask=keep, other=0)
    inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    gelu = 0.5 * a * (1 + libdevice.tanh(inner))
    tl.store(c_ptr + row * row_stride + cols, gelu * b, mask=keep)


@tlxc.jit
def softmax_rows(x_ptr, y_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=keep, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * row_stride + cols, e / tl.sum(e, axis=0), mask=keep)


@tlxc.jit
def rms_norm_rows(x_ptr, w_ptr, y_ptr, row_stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=keep, other=0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * row_stride + cols, x * inv * w, mask=keep)
