"""``ir.core.clone_module``: the copy passes rewrite while the frontend's module lives on (the
interpreter runs it; ``compiler.copy_module``).  It must be a deep copy of the IR -- no op, block,
region or value shared, operands and attributes pointing into the copy -- and the passes must
produce from it exactly what they produce from ``copy.deepcopy`` of the same module."""
from __future__ import annotations

import copy

import pytest
import torch

import tlxc
import tlxc.compiler as compiler
from tlxc.ir.core import Module, Operation, Value, clone_module
from tlxc.ir.printer import print_module


def _ir_objects(module: Module) -> dict[int, object]:
    out: dict[int, object] = {}
    for op in module.walk():
        out[id(op)] = op
        out.update((id(v), v) for v in op.results)
        for region in op.regions:
            out[id(region)] = region
            out[id(region.block)] = region.block
            out.update((id(a), a) for a in region.block.args)
    return out


def _frontend_modules(monkeypatch, launch) -> list[Module]:
    """The frontend modules of ``launch``'s interpreted kernels (the ones the barrier check copies)."""
    seen: list[Module] = []

    def spy(module):
        seen.append(module)
        return clone_module(module)

    monkeypatch.setattr(compiler, "copy_module", spy)
    launch()
    assert seen, "the interpreted launch copied no module: the spy is stale"
    return seen


def _attention():
    q = torch.randn(1, 70, 2, 64, dtype=torch.bfloat16)
    tlxc.ops.attention(q, q, q, causal=True)


def _matmul_ws():
    a = torch.randn(70, 64, dtype=torch.bfloat16)
    b = torch.randn(64, 90, dtype=torch.bfloat16)
    tlxc.ops.matmul(a, b, config="ws_128x128x64_s5")


@pytest.mark.parametrize("launch", [_attention, _matmul_ws], ids=["attention", "matmul_ws"])
def test_clone_is_a_deep_copy_the_passes_treat_like_deepcopy(launch, monkeypatch):
    for original in _frontend_modules(monkeypatch, launch):
        text = print_module(original)
        clone = clone_module(original)
        assert print_module(clone) == text
        old, new = _ir_objects(original), _ir_objects(clone)
        assert len(new) == len(old) and not set(old) & set(new), "the clone shares IR objects with the original"
        for op in clone.walk():      # every operand and attribute reference lies inside the clone
            assert all(id(v) in new for v in op.operands), f"{op.name} uses a value of the original"
            assert op.parent is None or id(op.parent) in new
            for x in op.attrs.values():
                if isinstance(x, (Value, Operation)):
                    assert id(x) in new, f"{op.name}'s attribute names an object of the original"
        kernel = original.kernels[0]
        num_warps = int(kernel.attrs.get("num_warps", 4))
        by_clone = compiler.optimize(clone, "sm_90a", num_warps)
        by_deepcopy = compiler.optimize(copy.deepcopy(original), "sm_90a", num_warps)
        assert print_module(by_clone) == print_module(by_deepcopy)
        assert print_module(original) == text, "passes on the clone changed the original"


def test_attributes_naming_values_and_mutable_containers_are_copied():
    from tlxc.ir.types import ScalarType
    i32 = ScalarType("i32")
    inner = Operation([], [i32], attrs={"n": 3})
    user = Operation([inner.results[0]], [], attrs={"of": inner.results[0], "rows": [1, [2]],
                                                     "by": {"k": (inner, 4)}})
    kernel = Operation([], [], regions=[])
    from tlxc.ir.core import Block, Region
    block = Block()
    block.append(inner)
    block.append(user)
    kernel.regions = [Region(block)]
    kernel.regions[0].parent = kernel
    clone = clone_module(Module([kernel]))
    c_inner, c_user = clone.kernels[0].regions[0].ops
    assert c_user.operands[0] is c_inner.results[0] and c_user.attrs["of"] is c_inner.results[0]
    assert c_user.attrs["by"]["k"][0] is c_inner and c_user.attrs["by"]["k"][1] == 4
    assert c_user.attrs["rows"] == [1, [2]] and c_user.attrs["rows"] is not user.attrs["rows"]
    assert c_user.attrs["rows"][1] is not user.attrs["rows"][1]
    assert c_inner.results[0].type is i32         # types are immutable: shared
