"""tl.inline_asm_elementwise: user PTX per element (ptx.user_inline_asm is the one place it
enters generated code), located errors for bad constraints, a clear refusal on the
interpreter, cubins, and the GPU."""
from __future__ import annotations

import kernels_dsm as K
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError, InterpreterError
from tlxc.frontend.specialize import specialization_from_args


def _compile(kfn, args):
    return compile_kernel(kfn, specialization_from_args(kfn, args), arch="sm_90a", num_warps=4)


def _affine_args(n=100, device="cpu"):
    x = torch.randn(n, device=device)
    k = torch.randint(-50, 50, (n,), dtype=torch.int32, device=device)
    y = torch.full((n,), float("nan"), device=device)
    q = torch.full((n,), -1, dtype=torch.int32, device=device)
    return x, k, y, q, n


def test_inline_asm_lowers_per_register_with_cuda_operands():
    x, k, y, q, n = _affine_args()
    compiled = _compile(K.asm_affine, {"x_ptr": x, "k_ptr": k, "y_ptr": y, "q_ptr": q, "n": n, "BLOCK": 64})
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    assert 'asm("fma.rn.f32 %0, %1, 0f40400000, 0f3F800000;" : "=f"(' in cuda      # pure: no volatile
    assert '"{ add.s32 %0, %2, %3; sub.s32 %1, %2, %3; }" : "=r"(' in cuda


def test_an_impure_asm_without_operands_is_kept():
    compiled = _compile(K.asm_no_operands, {"out_ptr": torch.empty(1, dtype=torch.int32)})
    assert 'asm volatile("nanosleep.u32 100; mov.u32 %0, 0;"' in compiled.asm["cuda"]


def test_the_interpreter_runs_the_instructions_it_models():
    x, k, y, q, n = _affine_args()
    tlxc.interpret(K.asm_affine)[(2,)](x, k, y, q, n, BLOCK=64)    # fma.rn.f32; add.s32 / sub.s32
    assert torch.allclose(y.double(), x.double() * 3 + 1, atol=1e-5)
    assert torch.equal(q, (k + 7) * 1000 + (k - 7))


def test_the_interpreter_refuses_inline_ptx_it_does_not_model_at_its_line():
    x, y = torch.arange(64, dtype=torch.int32), torch.empty(64, dtype=torch.int32)
    with pytest.raises(InterpreterError, match="inline PTX cannot run on the interpreter.*popc.b32") as info:
        tlxc.interpret(K.asm_unary)[(1,)](x, y, ASM="popc.b32 $0, $1;", DTYPE=tl.int32, BLOCK=64)
    assert "kernels_dsm.py" in info.value.render()


def test_constraints_that_do_not_match_the_operands_are_located_errors():
    with pytest.raises(CompilationError, match="must list 1 output.* then 1 input") as info:
        _compile(K.asm_bad_constraints, {"x_ptr": torch.empty(1)})
    assert "kernels_dsm.py" in info.value.render()


@pytest.mark.gpu
def test_gpu_inline_asm_matches_torch():
    x, k, y, q, n = _affine_args(n=1000, device="cuda")
    K.asm_affine[(16,)](x, k, y, q, n, BLOCK=64)
    assert torch.allclose(y.double(), x.double() * 3 + 1, atol=1e-5)
    assert torch.equal(q, (k + 7) * 1000 + (k - 7))
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    K.asm_no_operands[(1,)](out)
    assert out.item() == 5
