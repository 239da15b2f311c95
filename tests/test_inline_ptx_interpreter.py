"""The interpreter runs inline PTX made only of ``nanosleep`` and ``mov`` (exactly modelled:
``interpreter/inline_ptx.py``) and refuses any other statement at the user's line."""
from __future__ import annotations

import kernels_dsm as K
import pytest
import torch

import tlxc
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
    ("add.s32 $0, $1, 1;", "add.s32 $0, $1, 1"),                  # arithmetic is not modelled
    ("nanosleep.u32 10;", "writes outputs [] of [0]"),            # the output would be garbage
    ("mov.u32 $0, 1; mov.u32 $0, 2;", "writes outputs [0, 0]"),   # twice
    ("mov.u32 $1, 1;", "mov.u32 $1, 1"),                          # $1 is an input, not an output
])
def test_anything_else_is_refused(asm, why):
    with pytest.raises(UnsupportedPtx, match=why.replace("[", r"\[").replace("$", r"\$")):
        run_inline_ptx(asm, [T.i32], [torch.zeros(4, dtype=torch.int32).numpy()], (4,), register_dtype, 1)


def test_the_kernel_level_refusal_names_the_statement():
    x = torch.randn(100)
    k = torch.randint(-50, 50, (100,), dtype=torch.int32)
    # its fma.rn.f32 runs (32-bit float arithmetic is modelled); the integer add is not
    with pytest.raises(InterpreterError, match=r"\(interpreter/inline_ptx.py\); here: 'add\.s32 \$0, \$2, \$3'"):
        tlxc.interpret(K.asm_affine)[(2,)](x, k, torch.empty(100), torch.empty(100, dtype=torch.int32), 100,
                                          BLOCK=64)


def test_the_same_kernel_builds_for_sm90a():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    args = {"x_ptr": torch.empty(64), "bits_ptr": torch.empty(64, dtype=torch.int32), "y_ptr": torch.empty(64),
            "BLOCK": 64}
    compiled = compile_kernel(K.asm_moves, specialization_from_args(K.asm_moves, args), arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
