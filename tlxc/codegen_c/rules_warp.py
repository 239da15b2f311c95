"""Lowering rules for warp votes and user inline PTX (``ir/ops/warp.py``).

``vote_ballot_sync`` is one ``vote.sync.ballot.b32`` per register: a thread's
register ``i`` collects register ``i`` of the mask's lanes.  The asm of
``tl.inline_asm_elementwise`` is emitted by ``ptx.user_inline_asm`` only (through the target) (the
one place user assembly enters generated code), once per run of ``pack``
registers, with each operand passed as the register type of its constraint (bits
reinterpreted, the frontend checked the widths); narrow types with ``pack > 1``
are packed into 32-bit (or 16-bit) words first and unpacked after, as Triton
packs them (``ir/ops/warp.py``).
"""
from __future__ import annotations

from ..errors import CompilationError
from ..ir.ops.warp import CONSTRAINT_BITS, elements_per_register
from ..ir.types import ScalarType, TensorType
from ..passes.uniformity import Uniformity
from . import c_types as C
from .lower import lowering, registers

# the C type a constraint letter binds (the frontend admits these letters only)
_CONSTRAINT_CTYPE = {"h": "unsigned short", "r": "unsigned", "l": "unsigned long long", "f": "float",
                     "d": "double"}
_DIRECT = {"r": ("int", "unsigned"), "h": ("short", "unsigned short"), "l": ("long long", "unsigned long long"),
           "f": ("float",), "d": ("double",)}


@lowering("tlx.vote_ballot_sync")
def vote_ballot_sync(lw, op):
    """The ballot of ``mask``'s lanes: ``vote.sync`` over the lanes that execute it, ANDed with
    ``mask``.  Outside a branch on ``tlx.thread_id`` every lane of the warp executes the op, and
    ``vote.sync`` with a member mask that leaves out executing lanes is undefined (the H200
    returned all 32 bits for mask 0xF0F0F0F0), so the member mask is then the whole warp; under
    such a branch it is ``mask``, the lanes the user says take it."""
    pred = op.operands[0]
    mask = f"{op.attrs['mask']:#x}u"
    members = mask if _uniformity(lw).divergent(op) else "0xffffffffu"
    lw.assign_elementwise(op.results[0], lambda i: f"(int)({lw.target.expr('tlx_vote_ballot_sync', members, lw.ref(pred, i))} & {mask})")


def _uniformity(lw) -> Uniformity:
    found = lw.rule_state.get("warp.uniformity")
    if found is None:
        found = lw.rule_state["warp.uniformity"] = Uniformity(lw.kernel)
    return found


def _bind(letter: str, expr: str, t, output: bool) -> str:
    """``expr`` (storage type of ``t``) as the register type of constraint ``letter``."""
    if C.storage_type(t) in _DIRECT[letter]:
        return expr
    const = "" if output else "const "
    return f"*reinterpret_cast<{const}{_CONSTRAINT_CTYPE[letter]}*>(&{expr})"


@lowering("tl.inline_asm_elementwise")
def inline_asm_elementwise(lw, op):
    if not hasattr(lw.target, "user_inline_asm"):
        raise lw.error_unsupported(op, "tl.inline_asm_elementwise (inline PTX)")
    letters = [c.strip().lstrip("=") for c in op.attrs["constraints"].split(",")]
    results = op.results
    pack = op.attrs.get("pack", 1)
    for r in results:
        lw.declare(r)
    tensor = isinstance(results[0].type, TensorType)
    if tensor and registers(results[0].type) % pack:
        raise CompilationError(f"tl.inline_asm_elementwise with pack={pack}: each thread holds "
                               f"{registers(results[0].type)} elements of the result, not a multiple of {pack}; "
                               f"use a larger tensor or pack=1", op.loc)

    def ref(v, j):
        if not isinstance(v.type, TensorType):
            return lw.name(v)
        return lw.ref(v, "i" if j == 0 else f"i + {j}") if tensor else lw.ref(v, "0")

    def element(v):
        return v.type.element if isinstance(v.type, TensorType) else v.type

    # A result's or operand's registers for a run of ``pack`` of this thread's registers (an
    # elementwise asm sees the same elements whatever registers a run groups): ``per`` elements a
    # register (ir/ops/warp.py elements_per_register), results first, then the operands.
    def in_words(letter, t, per):
        """Packed elements, or a narrow element alone in a wider register ("=r" for an int8
        result): passed through a word, packed before the asm and unpacked after."""
        return per > 1 or (isinstance(t, ScalarType) and t.bits < CONSTRAINT_BITS[letter])

    outputs, inputs, unpack = [], [], []
    k = 0
    for r, res in enumerate(results):
        per = elements_per_register(element(res), pack)
        for j in range(0, pack, per):
            letter = letters[k]
            if not in_words(letter, element(res), per):
                outputs.append((f"={letter}", _bind(letter, ref(res, j), element(res), True)))
            else:
                word = f"asm_word{len(unpack)}"
                unpack.append((word, letter, [ref(res, j + e) for e in range(per)], element(res).bits))
                outputs.append((f"={letter}", word))
            k += 1
    for v in op.operands:
        per = elements_per_register(element(v), pack)
        for j in range(0, pack, per):
            letter = letters[k]
            if not in_words(letter, element(v), per):
                inputs.append((letter, _bind(letter, ref(v, j), element(v), False)))
            else:
                inputs.append((letter, _packed(letter, [ref(v, j + e) for e in range(per)], element(v).bits)))
            k += 1
    stmt = lw.target.user_inline_asm(op.attrs["asm"], outputs, inputs, volatile=not op.attrs["pure"])
    if tensor:     # (not for_registers: it rewrites "[i]" in the text)
        lw.out.line("#pragma unroll")
        step = "++i" if pack == 1 else f"i += {pack}"
        lw.out.open(f"for (int i = 0; i < {registers(results[0].type)}; {step})")
    for word, letter, _, _ in unpack:
        lw.out.line(f"{_CONSTRAINT_CTYPE[letter]} {word};")
    lw.out.line(stmt)
    for word, _, elements, bits in unpack:
        for e, target in enumerate(elements):
            lw.out.line(f"*reinterpret_cast<{_BITS_CTYPE[bits]}*>(&{target}) = ({_BITS_CTYPE[bits]})({word} >> {e * bits});")
    if tensor:
        lw.out.close()


_BITS_CTYPE = {8: "unsigned char", 16: "unsigned short"}


def _packed(letter: str, elements: list[str], bits: int) -> str:
    """``elements`` (storage expressions of ``bits``-bit elements) in one register of constraint
    ``letter``, the first in the lowest bits (Triton's packing of narrow types)."""
    parts = [f"(unsigned)*reinterpret_cast<const {_BITS_CTYPE[bits]}*>(&{e})" + (f" << {i * bits}" if i else "")
             for i, e in enumerate(elements)]
    return f"({_CONSTRAINT_CTYPE[letter]})({' | '.join(f'({p})' for p in parts)})"


@lowering("tlx.warp_pipeline_begin", "tlx.warp_pipeline_end", "tlx.warp_pipeline_enter", "tlx.warp_pipeline_exit")
def warp_pipeline_stage(lw, op):
    """Warp-pipeline stages schedule AMD waves (``s_setprio``, ``s_barrier``); the AMD rules lower
    them (codegen_amdgcn/rules_hip.py).  TLX raises on other targets; so does tlxc."""
    raise lw.error_unsupported(op, "tlx.warp_pipeline_stage (AMD warp pipelines: gfx942 / gfx950 only)")


@lowering("tlx.amd_sched_barrier")
def amd_sched_barrier(lw, op):
    raise lw.error_unsupported(op, "tlx.amd_sched_barrier (an AMD scheduling fence: gfx942 / gfx950 only)")
