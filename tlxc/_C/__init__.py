"""Triton's ``triton._C`` as its tutorials reach it with the imports renamed (``from tlxc._C.libtriton import
nvidia``): only the cuBLAS handle that Triton's matmul tutorials time themselves against (``libtriton.py``).
Triton's compiler bindings (MLIR passes, ``ir``) have no counterpart here."""
from . import libtriton  # noqa: F401  (``triton._C.libtriton`` is an attribute, as in Triton)
