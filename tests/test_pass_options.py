"""Passes are frozen dataclasses whose fields are their own options, and
``default_pipeline(target, options)`` builds them per target (issue 20, item 5)."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import pytest

import tlxc.passes
from tlxc.check.check_barriers import CheckBarriers
from tlxc.compiler import check_passes, default_pipeline, frontend_passes
from tlxc.options import CompileOptions
from tlxc.passes.manager import Pass
from tlxc.passes.pipeline import PipelineLoads, RingOptions
from tlxc.passes.pipeline_operands import PipelineOperandLoads


def _pass_classes():
    for info in pkgutil.iter_modules(tlxc.passes.__path__):
        importlib.import_module(f"tlxc.passes.{info.name}")
    found, stack = set(), [Pass]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("tlxc."):
                found.add(sub)
                stack.append(sub)
    return found


def test_every_pass_is_a_named_frozen_dataclass():
    classes = _pass_classes()
    assert {c.__name__ for c in classes} >= {"Canonicalize", "PipelineLoads", "PlaceTasks", "HoistAllocations",
                                              "InsertClusterSyncs", "WarpPipelineBounds", "CheckBarriers"}
    for cls in classes:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        assert cls.name != "unnamed" and "name" not in {f.name for f in dataclasses.fields(cls)}, cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        PipelineLoads().num_stages = 2


def test_default_pipeline_builds_each_pass_with_its_options():
    options = CompileOptions(arch="sm_90a", num_stages=2, check_barriers=False)
    passes = {type(p).__name__: p for p in default_pipeline("sm_90a", options).passes}
    assert passes["PipelineLoads"].num_stages == 2 and passes["PipelineOperandLoads"].num_stages == 2
    assert passes["CheckBarriers"].mode == "off"
    assert CheckBarriers in {type(p) for p in default_pipeline("sm_90a").passes}
    assert default_pipeline("sm_90a").passes[-1].name == "allocate-shared"
    # per target: no wgmma rewrites where the target has no wgmma
    amd = [p.name for p in default_pipeline("gfx942").passes]
    assert "lower-dot-to-wgmma" not in amd and "pipeline-operand-loads" not in amd and "infer-layouts" in amd
    assert [p.name for p in frontend_passes("sm_90a")] == ["hoist-allocations", "cluster-syncs", "place-tasks",
                                                           "warp-pipeline-bounds"]
    assert [p.name for p in check_passes("sm_90a")][-1] == "infer-layouts"


def test_a_pass_option_wins_over_the_compile_options():
    # the pipeline's own num_stages is the depth; None falls back to the compile's
    assert PipelineLoads(num_stages=4).num_stages == 4 and PipelineOperandLoads().num_stages is None
    with pytest.raises(ValueError, match="check-barriers mode"):
        CheckBarriers(mode="loud")


def test_ring_options_come_from_the_environment_when_the_pass_is_built(monkeypatch):
    for name, value in (("TLXC_RING_FROM_START", "1"), ("TLXC_RING_BASE", "0"), ("TLXC_RING_COUNTER", "1"),
                        ("TLXC_EPILOGUE_OVERLAP", "0")):
        monkeypatch.setenv(name, value)
    built = PipelineLoads()
    monkeypatch.setenv("TLXC_RING_COUNTER", "0")
    assert built.ring == RingOptions(from_start=True, base=False, counter=True, epilogue_overlap=False)
    assert PipelineLoads().ring.counter is False


def test_a_registered_target_brings_its_vendor_and_stages(monkeypatch):
    """Adding a backend = add codegen_<x>/, register a target (docs/architecture.md): the vendor
    and the code stages come from the registry, no shared file lists them."""
    import tlxc.compiler as compiler
    from tlxc.codegen_c.lower import RULES, lowering
    from tlxc.target import STAGE_SUFFIXES, TARGETS, Target, vendor_stages, vendors
    assert compiler.CODE_STAGES == ("cuda", "ptx", "cubin", "hip", "hsaco", "amdgcn")
    assert set(compiler.CODE_STAGES) <= set(STAGE_SUFFIXES)
    assert vendor_stages("amd") == ("hip", "hsaco", "amdgcn") and vendors() == ("nvidia", "amd")
    with pytest.raises(ValueError, match="unknown vendor 'acme'"):
        lowering("tl.store", vendor="acme")
    monkeypatch.setitem(TARGETS, "acme1", Target("acme1", "acme", None, "Acme 1", backend="tlxc.codegen_acme.backend",
                                                 stages=("acmebin",)))
    assert "acme" in vendors() and vendor_stages("acme") == ("acmebin",)

    def rule(lw, op):
        pass
    try:
        lowering("tl.store", vendor="acme")(rule)
        assert RULES[("tl.store", "acme")] is rule
    finally:
        RULES.pop(("tl.store", "acme"), None)
