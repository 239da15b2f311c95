"""Specializations: what a compiled kernel is keyed by.

A ``Specialization`` fixes, for every parameter of a kernel, either a
compile-time value (``tl.constexpr`` parameters, ints equal to 1, None) or a
runtime IR type, plus the divisibility-by-16 facts that let codegen vectorize.
It comes from launch arguments (``tlxc/runtime/binding.py``) or from a
``--signature`` string / annotations (the CLI).
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from .. import language as tl
from ..errors import CompilationError, LaunchError
from ..ir import types as T
from ..ir.arg_types import pointee_of_array, pointee_of_tensor
from ..ir.types import PointerType, ScalarType, Type


@dataclass
class Specialization:
    params: dict[str, tuple[str, Any]] = field(default_factory=dict)   # name -> (kind, value/type)
    divisibility: dict[str, int] = field(default_factory=dict)

    def key(self) -> tuple:
        items = []
        for name, (kind, value) in self.params.items():
            items.append((name, kind, _key_of(value), self.divisibility.get(name, 1)))
        return tuple(items)

    def runtime_params(self) -> list[tuple[str, Type]]:
        return [(n, v) for n, (k, v) in self.params.items() if k == "runtime"]


def _key_of(value) -> Any:
    if isinstance(value, (ScalarType, PointerType, T.TensorDescType)):
        return ("type", str(value))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (tuple, list)):
        return tuple(_key_of(v) for v in value)
    return (type(value).__name__, repr(value))


def is_constexpr_annotation(annotation, fn) -> bool:
    if annotation is tl.constexpr:
        return True
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return False


def is_const_annotation(annotation, fn) -> bool:
    """``x_ptr: tl.const`` (Triton's read-only pointer parameter)."""
    if annotation is tl.const:
        return True
    if isinstance(annotation, str):
        try:
            return eval(annotation, dict(fn.__globals__)) is tl.const
        except Exception:  # noqa: BLE001  (annotation_type reports annotations that do not evaluate)
            return False
    return False


def annotation_type(annotation, fn) -> Type | None:
    """An IR type from an annotation such as ``tl.pointer_type(tl.bfloat16)`` or ``tl.int64``."""
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, dict(fn.__globals__))
        except Exception as exc:  # noqa: BLE001 (an annotation tlxc cannot evaluate gives no type)
            if _names_the_language(annotation, fn):
                raise _annotation_error(annotation, fn, exc) from None
            return None
    if isinstance(annotation, (ScalarType, PointerType, T.TensorDescType)):
        return annotation
    return None


def _names_the_language(text: str, fn) -> bool:
    """Whether a (postponed, ``from __future__ import annotations``) annotation starts with a
    name bound to tlxc's language modules: the user meant a tlxc type, and a mistake in it must
    not silently leave the parameter untyped."""
    head = re.match(r"\s*([A-Za-z_]\w*)", text)
    module = fn.__globals__.get(head.group(1)) if head else None
    return getattr(module, "__name__", "").split(".")[0] == "tlxc" and inspect.ismodule(module)


def _annotation_error(text: str, fn, exc: Exception) -> CompilationError:
    """A located error for an annotation of ``fn`` that does not evaluate."""
    import ast

    from .source import get_source
    reason = exc.message if isinstance(exc, CompilationError) else f"{type(exc).__name__}: {exc}"
    message = f"the annotation '{text}' of a parameter of {fn.__name__} does not evaluate ({reason})"
    try:
        src = get_source(fn)
    except CompilationError:
        return CompilationError(message)
    args = src.tree.args
    for arg in args.posonlyargs + args.args + args.kwonlyargs:
        if arg.annotation is not None and ast.unparse(arg.annotation) == text:
            return src.error(f"the annotation of parameter '{arg.arg}' of {fn.__name__} does not evaluate "
                             f"({reason})", arg.annotation)
    return src.error(message, src.tree)


_SIG_SCALARS = {
    "i1": T.i1, "i8": T.i8, "i16": T.i16, "i32": T.i32, "i64": T.i64,
    "u8": T.u8, "u16": T.u16, "u32": T.u32, "u64": T.u64,
    "fp16": T.f16, "f16": T.f16, "bf16": T.bf16, "fp32": T.f32, "f32": T.f32, "fp64": T.f64, "f64": T.f64,
    "fp8e4nv": T.f8e4m3, "fp8e4m3": T.f8e4m3, "f8e4m3": T.f8e4m3, "fp8e5": T.f8e5m2, "fp8e5m2": T.f8e5m2,
    "f8e5m2": T.f8e5m2,
}


def parse_type_spec(text: str) -> Type:
    """``*bf16`` → ptr<bf16>; ``i32`` → i32 (Triton's signature spelling)."""
    text = text.strip()
    if text.startswith("*"):
        return PointerType(parse_type_spec(text[1:]))
    if text.startswith("tensordesc<"):
        return _parse_descriptor_spec(text)
    if text not in _SIG_SCALARS:
        raise ValueError(f"unknown type '{text}' (expected e.g. *fp32, *bf16, i32, i64, fp32)")
    return _SIG_SCALARS[text]


@dataclass(frozen=True)
class DescriptorElement:
    """A signature's ``tensordesc<fp16>``: a TMA descriptor argument whose box is not
    known yet.  ``tlxc compile`` gives it the box an autotune config's ``pre_hook``
    assigns (``desc.block_shape = [BM, BK]``), as a launch would."""

    element: ScalarType

    def __str__(self) -> str:
        return f"tensordesc<{self.element}>"


_TRITON_DESCRIPTOR = re.compile(r"tensordesc<\s*(\w+)\s*(?:\[([\d,\s]*)\])?\s*>$")


def _parse_descriptor_spec(text: str) -> Type:
    """``tensordesc<64x64xbf16, swizzle=128>`` (tlxc's IR spelling), ``tensordesc<fp16[128, 64]>``
    (Triton's: the swizzle follows from the box, as at a launch) or ``tensordesc<fp16>`` (the box
    comes from a config's pre_hook: ``DescriptorElement``)."""
    match = _TRITON_DESCRIPTOR.match(text)
    if match is None:
        from ..ir.parser import Parser
        return Parser(text).parse_type()
    element = parse_type_spec(match.group(1))
    if not isinstance(element, ScalarType):
        raise ValueError(f"'{text}': a descriptor's element must be a scalar type such as fp16")  # noqa: TRY004
    if match.group(2) is None:
        return DescriptorElement(element)
    box = tuple(int(d) for d in match.group(2).split(",") if d.strip())
    from ..descriptors import DescriptorPlaceholder
    try:
        return DescriptorPlaceholder(element, box).ir_type()
    except LaunchError as exc:
        raise ValueError(f"'{text}': {exc.message}") from None


def _signature_items(text: str) -> list[str]:
    """Split at the commas that are not inside ``<...>`` (``tensordesc<64x64xbf16, swizzle=128>``)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def parse_signature(text: str) -> dict[str, Type]:
    """``"a=*bf16, n=i32:16, d=tensordesc<64x64xbf16, swizzle=128>"`` → {"a": ptr<bf16>, "n": i32, "d": ...}
    (hints are dropped; ``signature_hints`` reads them)."""
    return {name: parse_type_spec(type_text) for name, type_text, _ in _signature_entries(text)}


def signature_hints(text: str) -> dict[str, int]:
    """Triton's value hints of a signature: ``n=i32:16`` (``n`` is divisible
    by 16) → {"n": 16}; ``n=i32:1`` (``n`` equals 1) → {"n": 1}."""
    return {name: hint for name, _, hint in _signature_entries(text) if hint is not None}


def _signature_entries(text: str) -> list[tuple[str, str, int | None]]:
    entries = []
    for item in _signature_items(text):
        if "=" not in item:
            raise ValueError(f"signature entry '{item}' must look like NAME=TYPE")
        name, type_text = (s.strip() for s in item.split("=", 1))
        hint = None
        if ":" in type_text and ">" not in type_text.rpartition(":")[2]:
            type_text, _, hint_text = (s.strip() for s in type_text.rpartition(":"))
            if hint_text not in ("1", "16"):
                raise ValueError(f"hint ':{hint_text}' of '{item}': the hints are ':16' (divisible by 16) and "
                                 f"':1' (equal to 1)")
            hint = int(hint_text)
        entries.append((name, type_text, hint))
    return entries


def specialization_from_types(kfn, types: dict[str, Type], constexprs: dict[str, Any],
                              hints: dict[str, int] | None = None) -> Specialization:
    """For ahead-of-time compiles: every runtime param needs a type (from
    ``types`` or its annotation), every constexpr a value (or a default).
    Pointers are assumed 16-byte aligned, as torch allocations are.
    ``hints`` (from ``signature_hints``) say what a launch would find out from
    the value: an integer divisible by 16 (it lets loads and stores
    vectorize), or equal to 1 (it folds in as the constant 1)."""
    hints = dict(hints or {})
    spec = Specialization()
    sig = inspect.signature(kfn.fn)
    unknown = set(types) | set(constexprs)
    for name, param in sig.parameters.items():
        unknown.discard(name)
        if is_constexpr_annotation(param.annotation, kfn.fn):
            if name in constexprs:
                spec.params[name] = ("constexpr", _unwrap(constexprs[name]))
            elif param.default is not inspect.Parameter.empty:
                spec.params[name] = ("constexpr", _unwrap(param.default))
            else:
                raise CompilationError(f"missing value for constexpr parameter '{name}' of "
                                       f"{kfn.fn.__name__} (pass -D {name}=VALUE)")
            continue
        if name in constexprs:
            spec.params[name] = ("constexpr", _unwrap(constexprs[name]))
            continue
        t = types.get(name) or annotation_type(param.annotation, kfn.fn)
        if isinstance(t, DescriptorElement):
            raise CompilationError(f"descriptor parameter '{name}' of {kfn.fn.__name__} has no box: give it in "
                                   f"the signature ({name}=tensordesc<{t.element}[128, 64]>) or compile an "
                                   f"autotuned kernel whose config pre_hook assigns {name}.block_shape")
        if t is None:
            raise CompilationError(f"no type for parameter '{name}' of {kfn.fn.__name__}: annotate it "
                                   f"(e.g. {name}: tl.pointer_type(tl.float32)) or pass "
                                   f"--signature \"{name}=*fp32\"")
        hint = hints.pop(name, None)
        if hint is not None and not (isinstance(t, PointerType) or (isinstance(t, ScalarType) and t.is_integer)):
            raise CompilationError(f"hint ':{hint}' on parameter '{name}' of {kfn.fn.__name__}: hints apply to "
                                   f"integers and pointers, not {t}")
        if hint == 1:
            if isinstance(t, PointerType):
                raise CompilationError(f"hint ':1' on pointer parameter '{name}' of {kfn.fn.__name__}: a pointer "
                                       f"cannot equal 1 (':16' states its alignment, which tlxc assumes anyway)")
            spec.params[name] = ("constexpr", 1)
            continue
        spec.params[name] = ("runtime", t)
        if isinstance(t, PointerType) or hint == 16:
            spec.divisibility[name] = 16
    if hints:
        raise CompilationError(f"{kfn.fn.__name__} has no runtime parameter(s) named {', '.join(sorted(hints))} "
                               f"for the signature's hints")
    if unknown:
        raise CompilationError(f"{kfn.fn.__name__} has no parameter(s) named {', '.join(sorted(unknown))}")
    return spec


def _unwrap(v):
    """A host ``tl.constexpr(x)`` as ``x``, also inside tuples (``(tl.constexpr(16),)``: Triton's
    tests pass block shapes so), a namedtuple keeping its type."""
    if isinstance(v, tl.constexpr):
        return _unwrap(v.value)
    if isinstance(v, tuple):
        items = [_unwrap(x) for x in v]
        return type(v)(*items) if hasattr(v, "_fields") else tuple(items)
    return v


# torch dtype names (``str(torch.float16)`` without "torch.") -> IR element type.
def specialization_from_args(kfn, arguments: dict[str, Any]) -> Specialization:
    """The specialization a launch with these (bound, defaults applied) arguments
    compiles, as Triton does: constexpr parameters and None fold in; an int equal
    to 1 folds in as the constant 1; ints and pointers divisible by 16 are
    marked so; ``do_not_specialize`` parameters get neither treatment.  A scalar
    parameter annotated with a type (``n: tl.int64``) takes that type; tensors
    and numpy arrays become pointers to their element type; a
    ``tlxc.TensorDescriptor`` becomes its ``TensorDescType`` (element, box,
    swizzle).

    Both launch paths use this: the GPU's (``runtime/launch.py``) and the
    interpreter's (``interpreter/launch.py``)."""
    import numpy as np

    from ..descriptors import TensorDescriptor
    spec = Specialization()
    for name in kfn.param_names:
        if name not in arguments:
            raise LaunchError(f"missing argument '{name}' of {kfn.__name__}")
        value = arguments[name]
        plain = _unwrap(value)
        frozen = name in getattr(kfn, "do_not_specialize", ())
        annotated = annotation_type(kfn.signature.parameters[name].annotation, kfn.fn)
        read_only = is_const_annotation(kfn.signature.parameters[name].annotation, kfn.fn)
        if isinstance(plain, np.generic):
            plain = plain.item()
        if isinstance(plain, TensorDescriptor) and name not in kfn.constexpr_params:
            try:       # the box is checked here, when a launch first uses it (it may have been a placeholder)
                spec.params[name] = ("runtime", plain.ir_type())   # no divisibility: the map carries the address
            except LaunchError as exc:
                raise LaunchError(f"argument '{name}' of {kfn.__name__}: {exc.message}") from None
            continue
        if name in kfn.constexpr_params or isinstance(value, tl.constexpr) or plain is None or \
                isinstance(plain, (ScalarType, PointerType, str, tuple)):
            spec.params[name] = ("constexpr", plain)
        elif isinstance(plain, bool):
            spec.params[name] = ("runtime", annotated if isinstance(annotated, ScalarType) else T.i1)
        elif isinstance(plain, int):
            if isinstance(annotated, ScalarType):
                spec.params[name] = ("runtime", annotated)
            elif plain == 1 and not frozen:
                spec.params[name] = ("constexpr", 1)
                continue
            else:
                spec.params[name] = ("runtime", _int_type(name, plain))
            if not frozen and plain % 16 == 0:
                spec.divisibility[name] = 16
        elif isinstance(plain, float):
            spec.params[name] = ("runtime", annotated if isinstance(annotated, ScalarType) else T.f32)
        elif isinstance(plain, np.ndarray):
            spec.params[name] = ("runtime", PointerType(pointee_of_array(plain), const=read_only))
            if not frozen and plain.__array_interface__["data"][0] % 16 == 0:
                spec.divisibility[name] = 16
        elif hasattr(plain, "data_ptr") and hasattr(plain, "dtype"):
            spec.params[name] = ("runtime", PointerType(pointee_of_tensor(plain), const=read_only))
            if not frozen and plain.data_ptr() % 16 == 0:
                spec.divisibility[name] = 16
        else:
            raise LaunchError(f"argument '{name}' of {kfn.__name__} has type {type(plain).__name__}; "
                              f"expected a tensor, a number, None or a tl.constexpr")
    return spec


def _int_type(name: str, value: int) -> ScalarType:
    t = T.integer_type(value)
    if t is None:
        raise LaunchError(f"argument '{name}' = {value} does not fit in 64 bits")
    return t
