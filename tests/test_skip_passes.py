"""TLXC_SKIP_PASSES (passes/manager.py): optimization passes can be left out one by one to
bisect a wrong result or a slowdown; the kernel stays correct without them, an unknown or
required pass name is an error, and the disk cache keys on the variable."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_wgmma as K

from tlxc.errors import TlxcError
from tlxc.passes.manager import OPTIONAL_PASSES, skipped_passes

SIG = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32"
META = {"BM": 64, "BN": 64, "BK": 32}


def _ir():
    return K.single_dot.compile(SIG, META, arch="sm_90a", num_warps=4, stages=("ir.opt",)).asm["ir.opt"]


def test_skipping_the_wgmma_lowering_keeps_tl_dot(monkeypatch):
    assert "tlx.async_dot " in _ir()
    monkeypatch.setenv("TLXC_SKIP_PASSES", "lower-dot-to-wgmma")
    text = _ir()
    assert "tlx.async_dot " not in text and "tl.dot" in text


@pytest.mark.parametrize("value", ["no-such-pass", "infer-layouts", "check-barriers,fold-dot-add"])
def test_unknown_or_required_pass_is_an_error(monkeypatch, value):
    monkeypatch.setenv("TLXC_SKIP_PASSES", value)
    with pytest.raises(TlxcError, match="TLXC_SKIP_PASSES: .* is not an optimization pass"):
        skipped_passes()


def test_every_optional_pass_exists_in_the_pipeline():
    from tlxc.compiler import default_pipeline
    names = {p.name for p in default_pipeline("sm_90a").passes}
    assert set(OPTIONAL_PASSES) <= names


def test_results_unchanged_with_every_optimization_skipped(monkeypatch):
    a = torch.randn(64, 32).half()
    b = torch.randn(32, 64).half()
    ref = a.double() @ b.double()
    outs = []
    for skip in ("", ",".join(OPTIONAL_PASSES)):
        monkeypatch.setenv("TLXC_SKIP_PASSES", skip)
        c = torch.full((64, 64), float("nan"))
        K.single_dot[(1,)](a, b, c, **META)
        outs.append(c)
    for c in outs:
        assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-3
