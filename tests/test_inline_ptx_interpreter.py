"""The interpreter runs the inline PTX ``interpreter/inline_ptx.py`` models exactly (``nanosleep``,
``mov``, and register arithmetic: tests/test_inline_asm_packed.py, tests/test_inline_asm_narrow.py)
and refuses any other statement at the user's line."""
from __future__ import annotations

import kernels_dsm as K
import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import InterpreterError
from tlxc.interpreter.inline_ptx import UnsupportedPtx, run_inline_ptx
from tlxc.interpreter.values import register_dtype
from tlxc.ir import types as T


def test_sleep_and_moves_run_on_the_interpreter():
    x = torch.randn(64)
    bits = torch.full((64,), -1, dtype=torch.int32)
    y = torch.full((64,), float("nan"))
    tlxc.interpret(K.asm_moves)[(1,)](x, bits, y, BLOCK=64)
    assert torch.equal(bits, x.view(torch.int32) & 0x7F)
    assert torch.equal(y, x * 0.5)


def test_a_scalar_result_without_operands():
    out = torch.zeros(1, dtype=torch.int32)
    tlxc.interpret(K.asm_no_operands)[(1,)](out)
    assert out.item() == 5


@pytest.mark.parametrize("asm, why", [
    ("popc.b32 $0, $1;", "popc.b32 $0, $1"),                      # an instruction not modelled
    ("mov.u32 $0, %laneid;", "mov.u32 $0, %laneid"),              # a special register not modelled
    ("nanosleep.u32 10;", "writes outputs [] of [0]"),            # the output would be garbage
    ("mov.u32 $1, 1;", "mov.u32 $1, 1"),                          # $1 is an input, not an output
])
def test_anything_else_is_refused(asm, why):
    with pytest.raises(UnsupportedPtx, match=why.replace("[", r"\[").replace("$", r"\$")):
        run_inline_ptx(asm, [T.i32], [torch.zeros(4, dtype=torch.int32).numpy()], (4,), register_dtype, 1)


def test_an_output_written_twice_holds_its_last_write():
    """An output operand is a register: the machine keeps its last write (and may read it back)."""
    out = run_inline_ptx("{ mov.b32 $0, 1; add.u32 $0, $0, $1; mov.b32 $0, $0; }", [T.i32],
                         [np.arange(4, dtype=np.int32)], (4,), register_dtype, 1)
    assert out[0].tolist() == [1, 2, 3, 4]


def test_the_kernel_level_refusal_names_the_statement():
    x = torch.arange(64, dtype=torch.int32)
    with pytest.raises(InterpreterError, match=r"\(interpreter/inline_ptx.py\); here: 'popc\.b32 \$0, \$1'"):
        tlxc.interpret(K.asm_unary)[(1,)](x, torch.empty(64, dtype=torch.int32), ASM="popc.b32 $0, $1;",
                                      DTYPE=tl.int32, BLOCK=64)


def test_the_same_kernel_builds_for_sm90a():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    args = {"x_ptr": torch.empty(64), "bits_ptr": torch.empty(64, dtype=torch.int32), "y_ptr": torch.empty(64),
            "BLOCK": 64}
    compiled = compile_kernel(K.asm_moves, specialization_from_args(K.asm_moves, args), arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
