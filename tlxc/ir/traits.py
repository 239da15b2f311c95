"""Op traits: what the passes, the checker and the code generators ask of an op, declared once
on its class (``Operation.traits``) instead of in lists of op names restated per file.

``has_trait(op, VIEW)`` takes an op or an op name (a name no op registers has no traits).
"""
from __future__ import annotations

from .core import OP_REGISTRY, Operation

VIEW = "view"                 # a view of a shared-memory (or tensor-memory) buffer or barrier array of this CTA
REMOTE_VIEW = "remote_view"   # a view of a peer CTA's buffer or barrier (clusters)
ALLOCATION = "allocation"     # allocates shared memory: buffers, barriers
ELEMENTWISE = "elementwise"   # each result element from the same-position operand elements (a layout passes through)
SIDE_EFFECT = "side_effect"   # writes memory, prints, traps, syncs or ends a region: kept when its results are unused


def has_trait(op: Operation | str, trait: str) -> bool:
    if isinstance(op, str):
        cls = OP_REGISTRY.get(op)
        return cls is not None and trait in cls.traits
    return trait in op.traits


__all__ = ["ALLOCATION", "ELEMENTWISE", "REMOTE_VIEW", "SIDE_EFFECT", "VIEW", "has_trait"]
