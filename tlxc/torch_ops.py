"""tlxc kernels inside ``torch.compile``: register the host function as a custom op.

``torch.compile`` cannot trace into a tlxc launch (it is Python that calls the
CUDA driver), so a host function that launches tlxc kernels is registered as a
``torch.library.custom_op``: Dynamo then sees one opaque op, traces shapes
through its *fake* implementation (which allocates outputs without computing
them), and calls the real function at run time.  With that, the op works under
``torch.compile(fullgraph=True)``, in CUDA graphs made by ``mode="reduce-overhead"``,
and under ``torch.export``.  The recipe, with torch's own API::

    @torch.library.custom_op("mylib::softmax", mutates_args=())
    def softmax(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK=...)
        return out

    @softmax.register_fake
    def _(x):
        return torch.empty_like(x)        # same shape, dtype, device and strides as the real output

``register_custom_op`` below is the same in one call.  Rules that matter:

- every argument and the result need type annotations (torch derives the op's schema from them);
- an op that writes into an argument lists it in ``mutates_args``; one that only writes into
  its arguments returns ``None`` and needs no fake (``register_custom_op`` adds a no-op one);
- the fake must give outputs the real function's strides (``torch.empty_like`` of a contiguous
  input, ``x.new_empty(shape)`` for a fresh contiguous result);
- for training, add a backward with ``op.register_autograd(backward, setup_context=...)``.

See ``examples/custom_op.py`` and ``docs/runtime.md``.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

DEFAULT_NAMESPACE = "tlxc"


def register_custom_op(name: str, fn: Callable | None = None, *, mutates_args: Iterable[str] | str = (),
                       fake: Callable | None = None, device_types: str | Iterable[str] | None = None,
                       schema: str | None = None) -> Any:
    """Register ``fn`` (a host function that launches tlxc kernels) as ``torch.ops.<ns>.<op>``.

    ``name`` is ``"namespace::op"`` (``"op"`` alone means ``"tlxc::op"``).
    ``fake(*args, **kwargs)`` returns empty outputs shaped like the real ones;
    it may be omitted when ``fn`` is annotated ``-> None``.  Returns torch's
    ``CustomOpDef`` (call it like ``fn``; ``.register_autograd`` etc. work).
    Also usable as a decorator: ``@tlxc.register_custom_op("mylib::op", fake=...)``.

    Registering a name again (a module imported twice, a notebook cell run
    again) swaps in the new ``fn`` and ``fake`` where plain ``torch.library``
    would refuse; the schema must stay the same.
    """
    if fn is None:
        return lambda f: register_custom_op(name, f, mutates_args=mutates_args, fake=fake,
                                            device_types=device_types, schema=schema)
    import torch
    qualified = name if "::" in name else f"{DEFAULT_NAMESPACE}::{name}"
    if fake is None:
        fake = _no_output_fake(fn, qualified)
    mutated = mutates_args if isinstance(mutates_args, str) else tuple(mutates_args)
    schema = schema or torch.library.infer_schema(fn, mutates_args=mutated)
    registration = _REGISTERED.get(qualified)
    if registration is not None:
        if registration.schema != schema:
            raise RuntimeError(f"register_custom_op('{qualified}'): already registered with schema "
                               f"{registration.schema}; cannot change it to {schema} in one process")
        registration.impl, registration.fake = fn, fake
        return registration.op
    registration = _Registration(fn, fake, schema)

    @functools.wraps(fn)
    def impl(*args, **kwargs):
        return registration.impl(*args, **kwargs)

    def fake_impl(*args, **kwargs):
        return registration.fake(*args, **kwargs)

    registration.op = torch.library.custom_op(qualified, impl, mutates_args=mutated, device_types=device_types,
                                              schema=schema)
    registration.op.register_fake(fake_impl)
    _REGISTERED[qualified] = registration
    return registration.op


@dataclass
class _Registration:
    """One op: torch holds trampolines to ``impl``/``fake``, so a re-registration can replace them."""

    impl: Callable
    fake: Callable
    schema: str
    op: Any = None


_REGISTERED: dict[str, _Registration] = {}


def _no_output_fake(fn: Callable, qualified: str) -> Callable:
    returns = inspect.signature(fn).return_annotation
    if returns is None or returns == "None":
        return lambda *args, **kwargs: None
    raise TypeError(f"register_custom_op('{qualified}'): {getattr(fn, '__name__', fn)} returns tensors, so it "
                    f"needs fake=: a function of the same arguments returning empty outputs of the real "
                    f"shapes, dtypes and strides (e.g. lambda x: torch.empty_like(x))")


_TRACING = None      # (torch, is_compiling, current dispatch mode), bound on the first call (tlxc imports without torch)


def _tracing():
    global _TRACING
    if _TRACING is None:
        import torch
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        _TRACING = (torch, torch.compiler.is_compiling, _get_current_dispatch_mode)
    return _TRACING


def traced(*args) -> bool:
    """Whether a call on ``args`` is being traced: ``torch.compile``, a dispatch mode (make_fx's,
    FakeTensorMode), or a tensor subclass among them (fake, functional); non-tensors are ignored."""
    return _traced(False, args)


def needs_custom_op(*args) -> bool:
    """Whether a call of a host function on ``args`` must go through its custom op: autograd
    records it (grad mode on and a tensor argument requires grad) or it is being traced
    (``traced``).  Otherwise the function may launch directly, without the op's dispatch cost
    (this check: ~1 us, it is on every eager call's host path)."""
    return _traced(_tracing()[0].is_grad_enabled(), args)


def _traced(grad: bool, args: tuple) -> bool:
    """``traced``, or (with ``grad``) an argument that requires grad: one pass over ``args``."""
    torch, is_compiling, dispatch_mode = _tracing()
    for t in args:
        if type(t) is torch.Tensor:
            if grad and t.requires_grad:
                return True
        elif isinstance(t, torch.Tensor):        # a subclass: fake, functional, a wrapper
            return True
    return is_compiling() or dispatch_mode() is not None


__all__ = ["register_custom_op"]
