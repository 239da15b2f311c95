"""``tlx.async_tasks(mbarrier_try_wait_suspend_ns=N)``: every barrier wait of the kernel
uses ``mbarrier.try_wait.parity`` with a suspend-time hint of N ns (0 or None: no hint),
a performance hint the interpreter ignores."""
from __future__ import annotations

import kernels_ws as K
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import parse_signature, specialization_from_types

BLOCK = 128


def _cuda(**hints) -> str:
    spec = specialization_from_types(K.suspended_handoff, parse_signature("x_ptr=*fp32,out_ptr=*fp32"),
                                     {"BLOCK": BLOCK, **hints})
    return compile_kernel(K.suspended_handoff, spec, arch="sm_90a", num_warps=4).asm["cuda"]


def _wait_calls(cuda: str) -> list[str]:
    return [line.strip() for line in cuda.splitlines()
            if line.strip().startswith(("tlx_mbarrier_wait", "if (")) and "tlx_mbarrier_wait" in line]


@pytest.mark.parametrize("hint", [None, 0, 20000])
def test_every_wait_uses_the_hint(hint):
    waits = _wait_calls(_cuda(SUSPEND_NS=hint))
    assert len(waits) == 2, waits
    for call in waits:
        if not hint:
            assert "tlx_mbarrier_wait(" in call and "suspend" not in call
        else:
            assert "tlx_mbarrier_wait_suspend(" in call and call.endswith(f", {hint}u);"), call


def test_the_four_operand_try_wait_compiles_for_sm_90a():
    cuda = _cuda(SUSPEND_NS=20000)
    assert "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;" in cuda
    spec = specialization_from_types(K.suspended_handoff, parse_signature("x_ptr=*fp32,out_ptr=*fp32"),
                                     {"BLOCK": BLOCK, "SUSPEND_NS": 20000})
    compiled = compile_kernel(K.suspended_handoff, spec, arch="sm_90a", num_warps=4, debug_barriers=True)
    assert compiled.asm["cubin"]
    assert "20000u, 2000000000ull" in compiled.asm["cuda"]          # the watchdog keeps the hint


@pytest.mark.parametrize("bad", [-1, 2 ** 32, 1.5, True, "10"])
def test_a_bad_hint_is_an_error_at_the_argument(bad):
    spec = specialization_from_types(K.suspended_handoff, parse_signature("x_ptr=*fp32,out_ptr=*fp32"),
                                     {"BLOCK": BLOCK, "SUSPEND_NS": bad})
    with pytest.raises(tlxc.CompilationError, match=r"mbarrier_try_wait_suspend_ns=\.\.\.\) must be None or a "
                                                    r"compile-time integer") as info:
        compile_kernel(K.suspended_handoff, spec, arch="sm_90a", num_warps=4, stages=("ir",))
    assert "mbarrier_try_wait_suspend_ns=SUSPEND_NS" in str(info.value)


def test_the_interpreter_runs_the_kernel_unchanged():
    x = torch.randn(BLOCK)
    out = torch.full((BLOCK,), float("nan"))
    tlxc.interpret(K.suspended_handoff)[(1,)](x, out, BLOCK=BLOCK, SUSPEND_NS=1000)
    assert torch.equal(out, x * 2 + 1)


@pytest.mark.gpu
def test_gpu_hinted_waits():
    x = torch.randn(BLOCK, device="cuda")
    out = torch.full((BLOCK,), float("nan"), device="cuda")
    K.suspended_handoff[(1,)](x, out, BLOCK=BLOCK, SUSPEND_NS=20000)
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2 + 1)
