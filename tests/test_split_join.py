"""tl.split / tl.join: compile for sm_90a, a split of a wgmma accumulator picks
registers (no shared-memory round trip), errors name the argument.  Interpreter
semantics: tests/test_interpreter.py; GPU vs interpreter:
tests/test_gpu_vs_interpreter.py::test_split_and_join."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx

sys.path.insert(0, os.path.dirname(__file__))
import kernels_interp as K


def _compile(kernel, args: dict):
    for name, param in kernel.signature.parameters.items():
        args.setdefault(name, param.default)
    return compile_kernel(kernel, specialization_from_args(kernel, args), arch="sm_90a", num_warps=4,
                          stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))


def test_split_join_compiles():
    x = torch.empty(16, 64)
    compiled = _compile(K.split_join_kernel, {"x_ptr": x, "y_ptr": x, "z_ptr": x, "M": 16, "N": 64})
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@tlxc.kernel
def _split_accumulator(out_ptr: tl.pointer_type(tl.float32)):
    a = tlx.local_alloc((64, 64), tl.bfloat16, 1)
    b = tlx.local_alloc((64, 256), tl.bfloat16, 1)
    acc = tlx.async_dot(a[0], b[0], tl.zeros((64, 256), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    lo, hi = tl.split(tl.permute(tl.reshape(acc, (64, 2, 128)), (0, 2, 1)))
    rows = tl.arange(0, 64)[:, None]
    cols = tl.arange(0, 128)[None, :]
    tl.store(out_ptr + rows * 128 + cols, lo + hi)


def test_split_of_a_wgmma_accumulator_only_picks_registers():
    """The epilogue-subtiling idiom: the halves of a 64 x 256 accumulator are its column
    bit 7, a register bit of the wgmma layout -- no layout conversion, no shared memory
    beyond the two operand buffers."""
    compiled = _compile(_split_accumulator, {"out_ptr": torch.empty(64, 128)})
    assert compiled.metadata["shared_bytes"] == (64 * 64 + 64 * 256) * 2
    assert "tl.convert_layout" not in compiled.asm["ir.opt"]


@tlxc.kernel
def _split_bad(out_ptr: tl.pointer_type(tl.float32)):
    x = tl.zeros((16, 4), dtype=tl.float32)
    a, b = tl.split(x)
    tl.store(out_ptr + tl.arange(0, 16), tl.sum(a + b, 1))


@tlxc.kernel
def _join_bad(out_ptr: tl.pointer_type(tl.float32)):
    x = tl.zeros((16,), dtype=tl.float32)
    y = tl.zeros((16,), dtype=tl.int32)
    tl.store(out_ptr + tl.arange(0, 16), tl.sum(tl.join(x, y), 1))


@pytest.mark.parametrize("kernel, message", [
    (_split_bad, r"tl.split needs a tensor whose last dimension has size 2, got \[16, 4\]"),
    (_join_bad, r"tl.join needs operands of one dtype, got fp32 and int32|tl.join needs operands of one dtype"),
])
def test_errors_name_the_problem(kernel, message):
    with pytest.raises(tlxc.CompilationError, match=message):
        _compile(kernel, {"out_ptr": torch.empty(16)})
