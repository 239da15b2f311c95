"""One kernel's launch state put back as before its first launch, for the tests that build plans and
generated paths around fake drivers and must leave no trace for the next test."""
from __future__ import annotations


def forget_launches(kfn) -> None:
    """``kfn`` with no plans and no generated paths: its next launch takes the slow path."""
    kfn.cache.clear()
    kfn.fast_cache.clear()
    kfn._fast = kfn._other = kfn._first_launch
    kfn._generic = None
    kfn._specialized.clear()
    kfn._interpret = None
    kfn._env = None
