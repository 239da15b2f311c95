"""Tuples of tensors as kernel arguments (Triton 3.x: ``kernel[grid]((x, y), (1.0, None))``).

A tuple argument without a tensor in it stays what it always was here: a compile-time constant.
One that holds a tensor (a ``torch.Tensor``, a numpy array or a ``TensorDescriptor``, at any
depth) is a tuple of runtime values: each leaf is specialized as a top-level argument would be
(a pointer, an int or float, ``None`` or a ``tl.constexpr`` folded in).  The launch does that by
flattening: a generated kernel takes one parameter per leaf, rebuilds the tuples and calls the
kernel's own function with them (a ``@jit`` function calling another), so every launch path --
GPU, interpreter, warmup -- sees plain parameters.  One generated kernel per kernel and tuple
structure (the lengths, nested), cached on the kernel; errors in the body point at the kernel's
own lines."""
from __future__ import annotations

import itertools
import linecache
from typing import Any

from ..descriptors import TensorDescriptor
from ..language import core as tl_core

_BUILT = itertools.count()


def _is_tensor_leaf(value) -> bool:
    if isinstance(value, TensorDescriptor):
        return True
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return True
    return type(value).__name__ == "ndarray"


def _holds_tensor(value) -> bool:
    if isinstance(value, tuple):
        return any(_holds_tensor(v) for v in value)
    return _is_tensor_leaf(value)


def _structure(value):
    """The tuple's shape: a nested tuple of ``(type, [children])``, leaves ``None``."""
    if isinstance(value, tuple):
        return (type(value), tuple(_structure(v) for v in value))
    return None


def _leaves(value):
    """The tuple's leaves in order; a ``@jit`` function among them (a closure's callee) travels as a
    compile-time constant, as Triton passes one."""
    if isinstance(value, tuple):
        for v in value:
            yield from _leaves(v)
    elif getattr(value, "__tlxc_kernel__", False):
        yield tl_core.constexpr(value)
    else:
        yield value


def runtime_tuples(kfn, bound: tuple) -> dict[str, Any]:
    """The parameters whose argument is a tuple holding a tensor, with each one's structure
    (empty when there is none: the launch goes on as always)."""
    found = {}
    for name, value in zip(kfn.param_names, bound):
        if name not in kfn.constexpr_params and isinstance(value, tuple) and _holds_tensor(value):
            found[name] = _structure(value)
    return found


def flatten(kfn, bound: tuple, structures: dict[str, Any]) -> tuple[Any, tuple]:
    """(the generated flat kernel, its arguments) for a launch of ``kfn`` with ``bound``."""
    flat = []
    for name, value in zip(kfn.param_names, bound):
        if name in structures:
            flat.extend(_leaves(value))
        else:
            flat.append(value)
    return flat_kernel(kfn, structures), tuple(flat)


def flat_kernel(kfn, structures: dict[str, Any]):
    key = tuple(sorted((name, _key(s)) for name, s in structures.items()))
    cache = kfn.__dict__.setdefault("_flat_kernels", {})
    if key not in cache:
        cache[key] = _build(kfn, structures)
    return cache[key]


def _key(structure):
    kind, children = structure
    return (kind, tuple(None if c is None else _key(c) for c in children))


def _build(kfn, structures: dict[str, Any]):
    from .jit import KernelFunction

    names = set(kfn.param_names)
    namespace = dict(kfn.fn.__globals__)
    params, call, annotations = [], [], {}
    hidden = iter(range(1 << 30))

    def private(obj) -> str:
        label = f"__tlxc_obj{next(hidden)}"
        namespace[label] = obj
        return label

    def rebuild(prefix: str, structure) -> str:
        kind, children = structure
        parts = []
        for i, child in enumerate(children):
            leaf = f"{prefix}__{i}"
            while leaf in names:
                leaf += "_"
            if child is None:
                names.add(leaf)
                params.append(leaf)
                parts.append(leaf)
            else:
                parts.append(rebuild(leaf, child))
        if hasattr(kind, "_fields"):                     # a namedtuple, rebuilt positionally
            return f"{private(kind)}({', '.join(parts)})"
        return "(" + "".join(p + ", " for p in parts) + ")"     # (a tuple subclass such as torch.Size: a tuple)

    for name in kfn.param_names:
        param = kfn.signature.parameters[name]
        if name in structures:
            call.append(rebuild(name, structures[name]))
            continue
        params.append(name)
        call.append(name)
        if param.annotation is not param.empty:
            annotations[name] = param.annotation
    body = private(kfn)
    filename = f"<tlxc: {kfn.__name__} with tuple arguments {next(_BUILT)}>"     # (unique: linecache's key)
    text = (f"def {kfn.__name__}({', '.join(params)}):\n"
            f"    {body}({', '.join(call)})\n")
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    fn = namespace[kfn.__name__]
    fn.__annotations__ = annotations                   # (strings evaluate in the kernel's own globals)
    fn.__module__ = kfn.fn.__module__
    dns = tuple(n for n in kfn.do_not_specialize if n in annotations or n in params)
    return KernelFunction(fn, do_not_specialize=dns, debug=kfn.debug)


__all__ = ["flat_kernel", "flatten", "runtime_tuples"]
