"""tlxc.profiler: Triton's profiler ("proton") as a stand-in that records nothing, so TLX's
tutorials that import it run with their imports renamed (issue 25)."""
from __future__ import annotations

import warnings

import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.profiler as proton
import tlxc.profiler.language as pl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret


@tlxc.kernel
def scaled(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32), N: tl.constexpr,
           PROFILE: tl.constexpr = True):
    offs = tl.arange(0, N)
    if PROFILE:
        pl.enter_scope("load")
    x = tl.load(x_ptr + offs)
    if PROFILE:
        pl.exit_scope("load")
    tl.store(y_ptr + offs, x * 2.0)


def test_scopes_compile_to_nothing_and_change_no_result():
    x = torch.randn(64)
    y = torch.zeros(64)
    interpret(scaled, (1,), (x, y), {"N": 64})
    assert torch.equal(y, x * 2)
    spec = specialization_from_types(scaled, {}, {"N": 64})
    with_scopes = compile_kernel(scaled, spec, stages=("ir",)).asm["ir"]
    spec_off = specialization_from_types(scaled, {}, {"N": 64, "PROFILE": False})
    without = compile_kernel(scaled, spec_off, stages=("ir",)).asm["ir"]
    strip = lambda text: [line.split(" loc(")[0] for line in text.splitlines() if "PROFILE" not in line]  # noqa: E731
    assert len(strip(with_scopes)) == len(strip(without))


@pytest.mark.parametrize("mode, text", [("runtime", "'name' must be a compile-time constant"),
                                        ("number", "proton.enter_scope: 'name' must be a compile-time string")])
def test_scope_name_must_be_a_string(mode, text):
    @tlxc.kernel
    def bad(x_ptr: tl.pointer_type(tl.float32), MODE: tl.constexpr):
        if MODE == "runtime":
            pl.enter_scope(tl.program_id(0))
        else:
            pl.enter_scope(3)

    with pytest.raises(TlxcError, match=text):
        compile_kernel(bad, specialization_from_types(bad, {}, {"MODE": mode}), stages=("ir",))


def test_host_calls_run_and_warn_that_nothing_is_recorded():
    proton._WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = proton.start("run", hook="triton")
        with proton.scope("region"):
            value = 3

        @proton.scope("decorated")
        def f():
            return 4

        proton.activate(session)
        proton.deactivate(session)
        proton.finalize()
    assert session == 0 and value == 3 and f() == 4
    messages = [str(w.message) for w in caught if issubclass(w.category, proton.ProfilerWarning)]
    assert len(messages) == 1 and "record and write nothing" in messages[0]


def test_in_kernel_markers_refuse_host_calls():
    with pytest.raises(TlxcError, match="proton.enter_scope"):
        pl.enter_scope("x")
