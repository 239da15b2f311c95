"""``kernel[grid](*args, **kwargs)``: the launcher.

Minimal for now: the CPU interpreter branch (``TLXC_INTERPRET=1``,
``interpret=True``, or every tensor argument on the CPU).  The GPU branch is
wired by the runtime.
"""
from __future__ import annotations


class Launcher:
    def __init__(self, kfn, grid):
        self.kfn = kfn
        self.grid = grid

    def __call__(self, *args, **kwargs):
        from ..interpreter import maybe_interpret
        if maybe_interpret(self.kfn, self.grid, args, kwargs):
            return None
        raise NotImplementedError("GPU launch path not wired yet")
