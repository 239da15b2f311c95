"""How ``tlxc compile`` / ``tlxc check`` find the kernels of a file and what an
autotuned kernel compiles to.

Kernels a file defines:

- module-level ``@tlxc.kernel`` functions, also under ``@tlxc.autotune`` and
  ``@tlxc.heuristics`` (the wrapper is kept: it supplies configs and values);
- kernels defined inside functions (unit tests define them in test functions).
  The file's AST is searched for nested ``def``s decorated with ``*.jit`` or
  ``*.kernel``; each is defined again, on its own, in the module's namespace
  (its other decorators are not applied: they may name the enclosing
  function's locals), and named by its enclosing scopes: ``test_dot.kernel``.
  Names it takes from the enclosing function are unknown and give the usual
  "not defined" error at their line; parameter defaults that name them make
  the kernel unavailable (a note says why).

An autotuned kernel compiles one specialization per chosen config (``--config
N``, default 0, or ``all``): the config's values are its constexprs (``-D``
overrides them), its ``num_warps`` and ``ctas_per_cga`` the launch's (unless
``--num-warps`` / ``--ctas-per-cga`` are given), and its ``pre_hook`` runs on
placeholder descriptors, so that a ``--signature`` descriptor without a box
(``a_desc=tensordesc<fp16>``) gets the box the hook assigns, as at a launch.
``@tlxc.heuristics`` values are computed from the constexprs known; one that
needs a runtime argument must be given with ``-D``.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from . import language as tl
from .errors import LaunchError
from .frontend.specialize import parse_type_spec
from .runtime.autotune import Autotuner, Config, Heuristics, KernelWrapper

_KERNEL_DECORATORS = {"jit", "kernel"}


class KernelSetupError(Exception):
    """A config, heuristic or pre_hook cannot give a kernel what it needs (a command-line problem)."""


# -- finding kernels ---------------------------------------------------------------------------------

def module_level_kernels(module) -> list[tuple[str, Any, Any]]:
    """(name, kernel, wrapper or None) for each kernel bound at module level, once, in order."""
    found, seen = [], set()
    for attr, value in vars(module).items():
        if isinstance(value, KernelWrapper):
            kfn, wrapper = value.kernel, value
        elif getattr(value, "__tlxc_kernel__", False):
            kfn, wrapper = value, None
        else:
            continue
        if id(kfn) in seen:
            continue
        seen.add(id(kfn))
        found.append((attr, kfn, wrapper))
    return found


def nested_kernels(module) -> tuple[list[tuple[str, Any]], list[str]]:
    """([(qualified name, kernel)], [notes]) for the kernels defined inside functions."""
    file = getattr(module, "__file__", None)
    if not file:
        return [], []
    text = Path(file).read_text()
    lines = text.splitlines(keepends=True)
    found, notes = [], []
    for qualified, node in _nested_kernel_defs(ast.parse(text, file)):
        try:
            fn = _define_alone(module, file, lines, node)
        except Exception as exc:  # noqa: BLE001 (the user's code: reported in one line)
            notes.append(f"{qualified} (line {node.lineno}) cannot be defined outside its function: "
                         f"{type(exc).__name__}: {exc}")
            continue
        from .runtime.jit import kernel
        found.append((qualified, kernel(fn)))
    return found, notes


def _nested_kernel_defs(tree: ast.Module):
    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if scope and isinstance(child, ast.FunctionDef) and _is_kernel_def(child):
                    yield ".".join([*scope, child.name]), child
                yield from visit(child, [*scope, child.name])
            else:
                yield from visit(child, scope)
    yield from visit(tree, [])


def _is_kernel_def(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name in _KERNEL_DECORATORS:
            return True
    return False


def _define_alone(module, file: str, lines: list[str], node: ast.FunctionDef):
    """Execute the ``def`` (without its decorators) in the module's namespace, at its own
    line numbers, so that its source, locations and globals are the file's."""
    body = "".join(lines[node.lineno - 1:node.end_lineno])
    source = "\n" * (node.lineno - 2) + "if True:\n" + body      # the def keeps its indentation
    namespace: dict[str, Any] = {}
    exec(compile(source, file, "exec"), vars(module), namespace)  # noqa: S102 (the user's own file)
    return namespace[node.name]


# -- autotune configs, heuristics, pre_hooks -----------------------------------------------------------

def wrapper_chain(wrapper) -> list[KernelWrapper]:
    """The wrappers from the outermost to the one just above the kernel."""
    chain = []
    while isinstance(wrapper, KernelWrapper):
        chain.append(wrapper)
        wrapper = wrapper.fn
    return chain


def autotune_configs(wrapper) -> list[Config] | None:
    for layer in wrapper_chain(wrapper):
        if isinstance(layer, Autotuner):
            return list(layer.configs)
    return None


def parse_config_choice(text: str | None) -> str | int:
    if text is None or text == "":
        return 0
    if text == "all":
        return "all"
    try:
        index = int(text)
    except ValueError:
        raise KernelSetupError(f"--config must be a config index (0, 1, ...) or 'all', got '{text}'") from None
    if index < 0:
        raise KernelSetupError(f"--config must be a config index (0, 1, ...) or 'all', got '{text}'")
    return index


def chosen_configs(name: str, configs: list[Config], choice: str | int) -> list[tuple[int, Config]]:
    if choice == "all":
        return list(enumerate(configs))
    if choice >= len(configs):
        raise KernelSetupError(f"--config {choice}: {name} has {len(configs)} autotune config(s) "
                               f"(0 to {len(configs) - 1})")
    return [(choice, configs[choice])]


def config_constexprs(name: str, wrapper, config: Config | None, defines: dict[str, Any],
                      params: list[str]) -> dict[str, Any]:
    """The constexpr values a launch with ``config`` passes: the config's values, ``-D``
    values over them, then the heuristics' values (innermost first, as at a launch)."""
    values = {**(config.kwargs if config is not None else {}), **defines}
    for layer in reversed(wrapper_chain(wrapper)):
        if not isinstance(layer, Heuristics):
            continue
        for key, rule in layer.values.items():
            if key in defines:
                continue
            try:
                values[key] = rule(dict(values))
            except Exception as exc:  # noqa: BLE001 (the user's lambda; reported in one line)
                raise KernelSetupError(f"{name}: @heuristics value '{key}' needs launch arguments to compute "
                                       f"({type(exc).__name__}: {exc}); pass -D {key}=VALUE") from None
    return {k: v for k, v in values.items() if k in params}


def resolve_descriptor_boxes(name: str, config: Config | None, types: dict[str, Any],
                             constexprs: dict[str, Any]) -> dict[str, Any]:
    """``types`` with each box-less descriptor (``tensordesc<fp16>``) replaced by the type
    the config's ``pre_hook`` gives it, run on placeholder descriptors as at a launch."""
    from .descriptors import DescriptorPlaceholder
    from .frontend.specialize import DescriptorElement
    open_boxes = {param: t for param, t in types.items() if isinstance(t, DescriptorElement)}
    if not open_boxes or config is None or config.pre_hook is None:
        return types
    placeholders = {param: DescriptorPlaceholder(t.element) for param, t in open_boxes.items()}
    nargs = {**constexprs, **placeholders, **config.launch_options()}
    try:
        config.pre_hook(nargs)
    except Exception as exc:  # noqa: BLE001 (the user's hook; reported in one line)
        raise KernelSetupError(f"{name}: the config's pre_hook failed on placeholder descriptors "
                               f"({type(exc).__name__}: {exc}); give the boxes in --signature "
                               f"(tensordesc<fp16[128, 64]>)") from None
    resolved = dict(types)
    for param, placeholder in placeholders.items():
        if not placeholder.block_shape:
            continue          # the hook left it: specialization says that it has no box
        try:
            resolved[param] = placeholder.ir_type()
        except LaunchError as exc:
            raise KernelSetupError(f"{name}: the box the pre_hook gives '{param}' is illegal: {exc.message}") \
                from None
    return resolved


__all__ = ["KernelSetupError", "autotune_configs", "chosen_configs", "config_constexprs", "module_level_kernels",
           "nested_kernels", "parse_config_choice", "resolve_descriptor_boxes", "wrapper_chain"]


class UsageError(Exception):
    """The command line asks for something impossible: one line on stderr, exit code 2."""


# -- -D values -------------------------------------------------------------------------
def parse_define(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` → (name, value): a Python literal or a dtype."""
    name, sep, value_text = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"-D expects NAME=VALUE, got '{text}'")
    return name, parse_define_value(value_text.strip(), name)


def parse_define_value(text: str, name: str = "VALUE") -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    dtype = _dtype_named(text)
    if dtype is not None:
        return dtype
    raise UsageError(f"-D {name}={text}: expected a Python literal (128, 0.5, True, 'text') "
                     f"or a dtype (bf16, fp32, tl.float16)")


def _dtype_named(text: str):
    for prefix in ("tlxc.language.", "tl.", "torch."):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    value = getattr(tl, text, None)
    if isinstance(value, tl.dtype):
        return value
    try:
        value = parse_type_spec(text)
    except ValueError:
        return None
    return value if isinstance(value, tl.dtype) else None


# -- loading the file --------------------------------------------------------------------
def load_module(path: str):
    """Import FILE under its own module name (its ``if __name__ == "__main__"`` block does not run)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no such file: {path}")
    if file.suffix != ".py":
        raise UsageError(f"{path} is not a Python file")
    file = file.resolve()
    name = _module_name(file)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module              # dataclasses, pickling and inspect look modules up here
    sys.path.insert(0, str(file.parent))   # so that FILE's own sibling imports resolve
    try:
        spec.loader.exec_module(module)
    except SyntaxError:
        _restore(name, previous)
        raise
    except Exception as exc:  # noqa: BLE001 (whatever the user's module raises is reported in one line)
        _restore(name, previous)
        where = _user_frame(exc, str(file))
        raise UsageError(f"importing {path} failed{where}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(file.parent))
    return module


def _module_name(file: Path) -> str:
    """FILE's own module name, unless that name is taken by another module
    (a kernel file called ``types.py`` must not replace the standard library's)."""
    name = file.stem if file.stem.isidentifier() else "tlxc_user_module"
    taken = sys.modules.get(name)
    if taken is not None and getattr(taken, "__file__", None) != str(file):
        return f"tlxc_user_{name}"
    return name


def _restore(name: str, previous) -> None:
    if previous is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = previous


def _user_frame(exc: BaseException, file: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == file]
    return f" at line {frames[-1].lineno}" if frames else ""


def module_kernels(module) -> list[tuple[str, Any]]:
    """The ``@tlxc.kernel`` objects bound at module level (also under ``@tlxc.autotune`` /
    ``@tlxc.heuristics``), each once, in definition order."""
    return [(attr, kfn) for attr, kfn, _ in module_level_kernels(module)]
