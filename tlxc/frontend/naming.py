"""Readable kernel symbols: ``softmax_kernel_BLOCK8192``.

The CUDA symbol of a compiled kernel is what Nsight Systems/Compute, the torch
profiler and ``cuobjdump`` show, so it names the Python function and the
values of its ``tl.constexpr`` parameters, the usual reason two launches of
one kernel run different code.  The IR keeps the Python name (``sym_name``);
the symbol travels in the kernel op's ``symbol`` attribute (set only where it
differs) and codegen emits it.

Rules: each declared constexpr in signature order contributes ``NAME`` +
value (ints ``BLOCK8192``, negatives ``OFFm3``, bools ``EVEN1``/``EVEN0``,
floats with ``.`` → ``p`` and ``-`` → ``m``, tuples joined by ``x``, dtypes by
their name); anything but ``[A-Za-z0-9_]`` becomes ``_``; runs of ``_`` in
the suffix collapse (``__`` is reserved in C++).  A symbol longer than
``MAX_SYMBOL_LENGTH`` keeps its head and ends in ``_h`` + 8 hex digits of the
full symbol's SHA-256, so distinct specializations keep distinct symbols.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

MAX_SYMBOL_LENGTH = 96
_HASH_DIGITS = 8
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
_UNDERSCORES = re.compile(r"_{2,}")


def kernel_symbol(name: str, spec, constexpr_params) -> str:
    """The C symbol of ``name`` specialized by ``spec`` (declared constexprs only)."""
    parts = [f"{param}{format_value(value)}" for param, (kind, value) in spec.params.items()
             if kind == "constexpr" and param in constexpr_params]
    return make_symbol(name, parts)


def make_symbol(name: str, parts: list[str]) -> str:
    base = _NOT_IDENTIFIER.sub("_", name) or "kernel"
    if base[0].isdigit():
        base = "k" + base
    suffix = _UNDERSCORES.sub("_", _NOT_IDENTIFIER.sub("_", "_".join(parts))).strip("_")
    symbol = f"{base}_{suffix}" if suffix else base
    if len(symbol) <= MAX_SYMBOL_LENGTH:
        return symbol
    digest = hashlib.sha256(symbol.encode()).hexdigest()[:_HASH_DIGITS]
    head = symbol[:MAX_SYMBOL_LENGTH - len(digest) - 2].rstrip("_")
    return f"{head}_h{digest}"


def artifact_name(kernel, arch: str) -> str:
    """The file name (no extension) of a compile's ``TLXC_DUMP_DIR`` files and of the
    ``TLXC_OVERRIDE_DIR`` source it picks up: the symbol, then 8 hex digits of the rest of the
    specialization -- argument types, divisibility, ``num_warps``, target -- which the symbol
    leaves out (``copy_kernel_BLOCK128-3f9a0c1e``), so specializations that differ only there
    (an f16 and an f32 launch) never overwrite or swap each other's files."""
    attrs = kernel.attrs
    symbol = attrs.get("symbol", attrs.get("sym_name", "kernel"))
    args = [str(a.type) for a in kernel.regions[0].block.args]
    rest = repr((args, tuple(attrs.get("arg_divisibility", ())), attrs.get("num_warps"), arch))
    return f"{symbol}-{hashlib.sha256(rest.encode()).hexdigest()[:_HASH_DIGITS]}"


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"m{-value}"
    if isinstance(value, float):
        return repr(value).replace("-", "m").replace(".", "p").replace("+", "")
    if isinstance(value, (tuple, list)):
        return "x".join(format_value(v) for v in value)
    if value is None:
        return "none"
    return str(getattr(value, "name", value))
