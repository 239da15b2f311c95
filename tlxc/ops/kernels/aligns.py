"""The host's divisibility facts inside a kernel: the launch specializes an integer argument
only on divisibility by 16 (as Triton does), so an op that knows more (a row stride or size that
is a multiple of 8, 4 or 2 elements: ``matmul.dot_aligns``) passes it as a constexpr and the
kernel states it with ``tl.multiple_of``: vector loads and stores instead of element copies."""
from ... import language as tl
from ...runtime.jit import jit


@jit
def aligned(x, align: tl.constexpr):
    """``x``, known to be a multiple of ``align`` (1: nothing known)."""
    if align > 1:
        x = tl.multiple_of(x, align)
    return x
