"""Calls of @jit helpers as Triton binds them.

Triton decides constexpr-ness by the value, not by the callee's annotation: tutorial
06's ``_attn_fwd_inner(..., offs_m: tl.constexpr, ...)`` receives offset tensors.  A
runtime value bound to a helper's ``tl.constexpr`` parameter stays a runtime value.
"""
from __future__ import annotations

import os

import torch

import tlxc
import tlxc.language as tl
from tlxc.interpreter import interpret


@tlxc.jit
def _masked_row(x_ptr, offs: tl.constexpr, n, SCALE: tl.constexpr):
    return tl.load(x_ptr + offs, mask=offs < n, other=0.0) * SCALE


@tlxc.jit
def scale_rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _masked_row(x_ptr, offs, n, 3.0), mask=offs < n)


def test_runtime_tensor_bound_to_a_constexpr_parameter():
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    n = 300
    x = torch.randn(n, generator=gen)
    out = torch.full((n,), float("nan"))
    interpret(scale_rows, ((n + 127) // 128,), (x, out, n), {"BLOCK": 128})
    assert torch.equal(out, x * 3.0)


def test_runtime_tensor_bound_to_a_constexpr_parameter_compiles():
    compiled = scale_rows.compile(signature="x_ptr=*fp32,out_ptr=*fp32,n=i32", constexprs={"BLOCK": 128},
                                  arch="sm_90a")
    assert compiled.asm["cubin"]


@tlxc.jit
def cast_to_output(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Triton kernels name types through ``.type``: ``out_ptr.type.element_ty`` (tutorial 06)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.static_assert(x.type.element_ty == tl.float32)
    tl.static_assert(x.type.shape == (BLOCK,))
    tl.store(out_ptr + offs, x.to(out_ptr.type.element_ty), mask=offs < n)


def test_type_attribute_names_the_element_type():
    x = torch.randn(100)
    out = torch.full((100,), float("nan"), dtype=torch.float16)
    interpret(cast_to_output, (1,), (x, out, 100), {"BLOCK": 128})
    assert torch.equal(out, x.half())
