"""Rules for matrix ops: ``tl.dot``.

Operands are already values of their dtype (bf16/fp8 values are exact on
their grid).  f32 operands with ``input_precision="tf32"`` are rounded to tf32
first (``tf32x3`` keeps full f32, as its three-pass split nearly does).
Products are exact in float32 for every 16-bit-or-narrower input, and tf32;
they accumulate in float32 (int32, wrapping, for int8), then add to ``acc``
and round to the accumulator's type.
"""
from __future__ import annotations

import numpy as np

from .registry import impl
from .values import round_tf32, round_to, scalar_of


@impl("tl.dot")
def dot(ctx, op, a, b, acc):
    element = scalar_of(op.operands[0].type)
    acc_type = scalar_of(op.results[0].type)
    if element.is_integer:
        product = np.matmul(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        return (product + np.asarray(acc, dtype=np.int64)).astype(np.int32)
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    if element.name == "f32" and op.attrs.get("input_precision", "ieee") == "tf32":
        a32, b32 = round_tf32(a32), round_tf32(b32)
    result = np.matmul(a32, b32) + np.asarray(acc, dtype=np.float32)
    return round_to(result, acc_type)
