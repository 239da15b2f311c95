"""The cache hints of global-memory accesses: ``cache_modifier=``, ``eviction_policy=``
and ``volatile=`` of ``tl.load`` / ``tl.store``, ``tlx.async_load`` and the TMA copies.

Triton's spellings (``semantic.py``: ``_str_to_load_cache_modifier``,
``_str_to_store_cache_modifier``, ``_str_to_eviction_policy``); a value outside them is
an error at the argument.  The checked hints become op attributes (``cache``,
``eviction``, ``volatile``), absent when they are the default, which the NVIDIA code
generator turns into PTX qualifiers (docs/codegen.md, "Cache hints").  They never
change what a kernel computes, so the interpreter ignores them.
"""
from __future__ import annotations

from . import semantic as S
from .semantic import SemanticError
from .values import Tensor

LOAD_CACHE_MODIFIERS = ("", ".ca", ".cg", ".cv")
STORE_CACHE_MODIFIERS = ("", ".wb", ".cg", ".cs", ".wt")
# "evict_normal" is PTX's name for the default; Triton spells it "".
EVICTION_POLICIES = ("", "evict_normal", "evict_first", "evict_last")


def _listed(values) -> str:
    return ", ".join(repr(v) for v in values)


def _choice(value, param: str, allowed: tuple[str, ...], what: str) -> str:
    if isinstance(value, Tensor):
        raise SemanticError(f"'{param}' must be a compile-time constant (tl.constexpr) string, "
                            f"got {S.describe(value)}", param=param)
    if value is None:
        return ""
    if not isinstance(value, str) or value not in allowed:
        got = repr(value) if isinstance(value, str) else S.describe(value)
        raise SemanticError(f"'{param}' must be one of {_listed(allowed)} ({what}), got {got}", param=param)
    return value


def load_cache_modifier(value, param: str = "cache_modifier", allowed=LOAD_CACHE_MODIFIERS) -> str:
    """A load's cache operator ("" for the default)."""
    return _choice(value, param, allowed, "a load's cache modifiers")


def store_cache_modifier(value, param: str = "cache_modifier") -> str:
    return _choice(value, param, STORE_CACHE_MODIFIERS, "a store's cache modifiers")


def eviction_policy(value, param: str = "eviction_policy") -> str:
    """"evict_first", "evict_last" or "" (the default, also spelled "evict_normal")."""
    policy = _choice(value, param, EVICTION_POLICIES, "eviction policies")
    return "" if policy == "evict_normal" else policy


def flag(value, param: str) -> bool:
    if isinstance(value, Tensor):
        raise SemanticError(f"'{param}' must be a compile-time constant (tl.constexpr) bool, "
                            f"got {S.describe(value)}", param=param)
    if value in (None, False, 0):
        return False
    if value is True or value == 1:
        return True
    raise SemanticError(f"'{param}' must be True or False, got {S.describe(value)}", param=param)


def attrs(cache: str = "", eviction: str = "", volatile: bool = False) -> dict[str, object]:
    """The op attributes of checked hints (none for the defaults: unhinted ops stay as they were)."""
    out: dict[str, object] = {}
    if cache:
        out["cache"] = cache
    if eviction:
        out["eviction"] = eviction
    if volatile:
        out["volatile"] = True
    return out
