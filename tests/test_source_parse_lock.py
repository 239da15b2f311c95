"""Kernel sources are parsed one at a time (frontend/source.py ``_PARSE_LOCK``): CPython 3.11's
ast.parse keeps interpreter-wide recursion state, and kernels compiled from several threads
at once could fail with "SystemError: AST constructor recursion depth mismatch"."""
from __future__ import annotations

import threading

import tlxc
import tlxc.language as tl
from tlxc.frontend import source


@tlxc.jit
def _twice(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


def test_get_source_parses_under_the_lock(monkeypatch):
    seen = []
    real_parse = source.ast.parse

    def parse(*args, **kwargs):
        seen.append(source._PARSE_LOCK.locked())
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(source.ast, "parse", parse)
    source.get_source(_twice.fn)
    assert seen == [True]


def test_kernels_compile_from_many_threads():
    errors = []

    def compile_one(block):
        try:
            _twice.compile(signature="x_ptr=*fp32", constexprs={"BLOCK": block}, stages=("ir",))
        except Exception as exc:       # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=compile_one, args=(2 ** (4 + i % 4),)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
