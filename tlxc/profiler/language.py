"""``triton.profiler.language`` as tlxc has it: the in-kernel scope markers, which
record nothing (``tlxc/language/proton.py``)."""
from __future__ import annotations

from ..language.proton import enter_scope, exit_scope

__all__ = ["enter_scope", "exit_scope"]
