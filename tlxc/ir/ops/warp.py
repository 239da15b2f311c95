"""Warp-level ops and user inline assembly.

* ``tlx.vote_ballot_sync(pred) {mask}``: ``vote.sync.ballot.b32`` (TLX
  semantics): bit ``l`` of the i32 result is set when lane ``l`` of the warp is
  in ``mask`` and its predicate holds.  A scalar predicate gives a scalar (each
  thread its warp's ballot); a tensor predicate a tensor of the same shape whose
  element holds the ballot of the register it sits in, over the warp's lanes
  (so it depends on the tensor's layout, as in TLX).
* ``tl.inline_asm_elementwise(args...) {asm, constraints, pure, pack}``:
  Triton's elementwise inline PTX: ``asm`` runs once per ``pack`` elements of
  the (broadcast) operands, results ``$0..`` first, then the operands; one
  result per dtype.  With ``pack > 1`` a result or operand narrower than 32
  bits has its run's elements packed into registers as Triton packs them
  (``elements_per_register``): ``min(32 // bits, pack)`` elements a register,
  element ``k`` of a register in bits ``k * bits`` up (the first element lowest),
  so int8 with ``pack=4`` is one ``r`` operand and bf16 with ``pack=4`` two.  The
  only place user assembly enters generated code (``codegen_c/rules_warp.py`` ->
  ``codegen_nvptx/ptx.py user_inline_asm``).
"""
from __future__ import annotations

from ..core import Operation
from ..types import ScalarType, TensorType, shape_of
from ._rules import expect_results

CONSTRAINT_BITS = {"h": 16, "r": 32, "l": 64, "f": 32, "d": 64}     # the register constraints tlxc knows


def elements_per_register(t: ScalarType, pack: int) -> int:
    """Elements of type ``t`` one register operand of ``tl.inline_asm_elementwise`` carries at
    ``pack``: Triton packs types narrower than 32 bits up to 32 bits (``min(32 // bits, pack)``),
    one element a register otherwise."""
    bits = getattr(t, "bits", 64)          # (a pointer: one 64-bit register)
    return min(32 // bits, pack) if bits < 32 else 1


def _is_i1(t) -> bool:
    elem = t.element if isinstance(t, TensorType) else t
    return isinstance(elem, ScalarType) and elem.is_boolean


class VoteBallotSyncOp(Operation):
    name = "tlx.vote_ballot_sync"

    def verify(self):
        expect_results(self, 1)
        if len(self.operands) != 1 or not _is_i1(self.operands[0].type):
            raise self.error("expected one i1 predicate (scalar or tensor)")
        mask = self.attrs.get("mask")
        if not isinstance(mask, int) or not 0 <= mask <= 0xFFFFFFFF:
            raise self.error(f"expected a 32-bit lane mask, got {mask!r}")
        r = self.result.type
        elem = r.element if isinstance(r, TensorType) else r
        if shape_of(r) != shape_of(self.operands[0].type) or getattr(elem, "name", None) != "i32":
            raise self.error(f"expected an i32 result of the predicate's shape, got {r}")


class InlineAsmElementwiseOp(Operation):
    name = "tl.inline_asm_elementwise"

    def verify(self):
        if not self.results:
            raise self.error("expected at least one result")
        for key in ("asm", "constraints"):
            if not isinstance(self.attrs.get(key), str):
                raise self.error(f"expected a string attribute '{key}'")
        pack = self.attrs.get("pack")
        if not isinstance(pack, int) or pack < 1:
            raise self.error(f"expected a positive 'pack', got {pack!r}")
        shapes = {shape_of(v.type) for v in self.operands if isinstance(v.type, TensorType)}
        if len(shapes) > 1:
            raise self.error(f"expected operands of one shape (broadcast first), got {sorted(shapes)}")
        shape = shapes.pop() if shapes else ()
        for r in self.results:
            if shape_of(r.type) != shape:
                raise self.error(f"expected results of the operands' shape {list(shape)}, got {r.type}")
