"""``triton._C.libtriton``'s cuBLAS handle, the part of it Triton's 09 tutorial uses
(``nvidia.cublas.CublasLt(workspace)``, the baseline it times against; 10's block-scaled methods are not
here), computed by torch: torch's matmul is cuBLAS on a GPU and runs on the CPU too.

    from tlxc._C.libtriton import nvidia            # was: from triton._C.libtriton import nvidia
    cublas = nvidia.cublas.CublasLt(workspace)      # workspace: a tensor, as Triton takes it (unused)
    cublas.matmul(a, b, c)                          # c = a @ b.T, all one dtype
    cublas.gemm(a, b, c, d, alpha, beta)            # d = alpha * a @ b.T + beta * c, c float16

Triton's rules hold: a [M, K], b [N, K] (b transposed), c / d [M, N]; a, b and the output of one dtype
among float8_e4m3fn, float16, bfloat16 and float32.  float32 products are computed in float32 (Triton's
cuBLAS handle asks for TF32: tlxc's results are the more exact ones); float8 ones with float32 sums, rounded
to float8 once.  Anything else is a RuntimeError naming the argument, as Triton raises one.
"""
from __future__ import annotations

from types import SimpleNamespace

_DTYPES = ("float8_e4m3fn", "float16", "bfloat16", "float32")


def _name(tensor) -> str:
    return str(tensor.dtype).rsplit(".", 1)[-1]


def _check(op: str, a, b, out, out_name: str) -> None:
    names = {"a": _name(a), "b": _name(b), out_name: _name(out)}
    if len(set(names.values())) != 1:
        raise RuntimeError(f"CublasLt.{op}: a, b and {out_name} must have one dtype, got "
                           + ", ".join(f"{k} {v}" for k, v in names.items()))
    if names["a"] not in _DTYPES:
        raise RuntimeError(f"CublasLt.{op}: dtype {names['a']} is not supported (expected one of "
                           f"{', '.join(_DTYPES)})")
    for arg, t in (("a", a), ("b", b), (out_name, out)):
        if t.dim() != 2:
            raise RuntimeError(f"CublasLt.{op}: '{arg}' must be 2-D, got shape {tuple(t.shape)}")
    (m, k), (n, kb) = a.shape, b.shape
    if k != kb:
        raise RuntimeError(f"CublasLt.{op}: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] must equal "
                           f"b.shape[1] (b is passed transposed, [N, K])")
    if tuple(out.shape) != (m, n):
        raise RuntimeError(f"CublasLt.{op}: '{out_name}' is {list(out.shape)}, expected [{m}, {n}] "
                           f"(a.shape[0], b.shape[0])")


def _product(a, b):
    """a @ b.T in float32 (float8 operands, whose torch matmul does not exist) or the operands' dtype."""
    import torch
    if a.dtype == torch.float8_e4m3fn:
        return a.float() @ b.float().t()
    return a @ b.t()


class CublasLt:
    """Triton's ``nvidia.cublas.CublasLt(workspace)``."""

    def __init__(self, workspace):
        if not hasattr(workspace, "data_ptr"):
            raise RuntimeError(f"CublasLt: 'workspace' must be a tensor, got {type(workspace).__name__}")
        self.workspace = workspace

    def matmul(self, a, b, c) -> None:
        """``c = a @ b.T``."""
        _check("matmul", a, b, c, "c")
        c.copy_(_product(a, b))

    def gemm(self, a, b, c, d, alpha: float, beta: float) -> None:
        """``d = alpha * a @ b.T + beta * c``; ``c`` float16, of ``d``'s shape."""
        import torch
        _check("gemm", a, b, d, "d")
        if c.dtype != torch.float16:
            raise RuntimeError(f"CublasLt.gemm: 'c' must be float16, got {_name(c)}")
        if tuple(c.shape) != tuple(d.shape):
            raise RuntimeError(f"CublasLt.gemm: 'c' is {list(c.shape)} and 'd' {list(d.shape)}: they must match")
        d.copy_(float(alpha) * _product(a, b).float() + float(beta) * c.float())


nvidia = SimpleNamespace(cublas=SimpleNamespace(CublasLt=CublasLt))
