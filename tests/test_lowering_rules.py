"""Lowering rules are keyed by (op, vendor) with a shared fallback (issue 20 item 2,
codegen_c/lower.py): a backend registers its own rule for an op without editing the
shared code generator, and the dispatch picks it for that vendor only."""
from __future__ import annotations

import pytest

import tlxc.codegen_amdgcn.rules_hip  # noqa: F401  (the AMD rules registered whatever else this worker ran)
import tlxc.language as tl
from tlxc.codegen_c import lower as L
from tlxc.codegen_nvptx.cuda import render_kernel
from tlxc.compiler import frontend, optimize
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir.types import PointerType, f32
from tlxc.runtime.jit import jit


@pytest.fixture
def rules(monkeypatch):
    """A private copy of the rule table: registrations here do not outlive the test."""
    table = dict(L.RULES)
    monkeypatch.setattr(L, "RULES", table)
    return table


def test_a_vendor_rule_wins_for_its_vendor_only(rules):
    def shared(lw, op):
        pass

    def amd_own(lw, op):
        pass

    L.lowering("test.op")(shared)
    L.lowering("test.op", vendor="amd")(amd_own)
    assert L.rule_for("test.op", "amd") is amd_own
    assert L.rule_for("test.op", "nvidia") is shared
    assert L.rule_for("test.other", "nvidia") is None


def test_one_rule_per_op_and_vendor(rules):
    L.lowering("test.op", vendor="nvidia")(lambda lw, op: None)
    with pytest.raises(ValueError, match="two nvidia lowering rules for test.op"):
        L.lowering("test.op", vendor="nvidia")(lambda lw, op: None)
    with pytest.raises(ValueError, match="unknown vendor 'intel'"):
        L.lowering("test.op", vendor="intel")


@jit
def _store_pid(out_ptr):
    tl.store(out_ptr + tl.program_id(0), 1.0)


def _cuda_of(kfn) -> str:
    spec = specialization_from_types(kfn, {"out_ptr": PointerType(f32)}, {})
    module = optimize(frontend(kfn, spec, arch="sm_90a"), "sm_90a", 4)
    return render_kernel(module.kernels[0], "sm_90a")[0]


def test_the_cuda_renderer_dispatches_on_its_vendor(rules):
    shared = L.rule_for("tl.program_id", "nvidia")
    before = _cuda_of(_store_pid)

    def marked(lw, op):
        lw.out.line("// nvidia's own program_id")
        shared(lw, op)

    rules.pop(("tl.program_id", "amd"), None)       # the HIP backend's own (codegen_amdgcn/rules_hip.py)
    L.lowering("tl.program_id", vendor="amd")(marked)
    assert _cuda_of(_store_pid) == before           # another vendor's rule changes nothing here
    L.lowering("tl.program_id", vendor="nvidia")(marked)
    after = _cuda_of(_store_pid)
    assert "// nvidia's own program_id" in after and after.replace("  // nvidia's own program_id\n", "") == before


BACKEND_OF_VENDOR = {None: "tlxc.codegen_c.", "nvidia": "tlxc.codegen_nvptx.", "amd": "tlxc.codegen_amdgcn."}


def test_rules_live_with_their_vendor():
    """Shared rules come from codegen_c/, a vendor's from its backend's package: the CUDA-only
    lowerings (wgmma, tcgen05, TMA, mbarriers, clusters) are NVIDIA's, so an AMD kernel using
    them gets a located 'no lowering' error instead of PTX."""
    assert L.RULES
    misplaced = sorted(f"{name} ({vendor}): {fn.__module__}" for (name, vendor), fn in L.RULES.items()
                       if not fn.__module__.startswith(BACKEND_OF_VENDOR[vendor]))
    assert not misplaced, misplaced
    for op in ("tlx.async_dot", "tlx.tcgen05_mma", "tlx.async_descriptor_load",
               "tlx.cluster_cta_rank", "tlx.gdc_wait"):
        assert L.rule_for(op, "nvidia") is not None and L.rule_for(op, "amd") is None, op
    # mbarriers: NVIDIA's in PTX, AMD's as LDS software barriers (codegen_amdgcn/rules_hip.py)
    assert L.rule_for("tlx.barrier_wait", "nvidia").__module__.startswith("tlxc.codegen_nvptx.")
    assert L.rule_for("tlx.barrier_wait", "amd").__module__ == "tlxc.codegen_amdgcn.rules_hip"
    assert L.rule_for("tl.load", "amd") is L.rule_for("tl.load", "nvidia") is not None
    # shared-memory buffers are shared; NVIDIA's own rule adds tensor memory and hands the rest over
    assert L.rule_for("tlx.local_load", "amd").__module__ == "tlxc.codegen_c.rules_buffers"
    assert L.rule_for("tlx.local_load", "nvidia").__module__ == "tlxc.codegen_nvptx.rules_tlx"
