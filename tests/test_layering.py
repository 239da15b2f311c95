"""Layers import only down (issue 20, docs/architecture.md "Layers").

Each package (or top-level module) of tlxc sits on a level; a module may import
modules of its own package and of lower levels, never of a higher level, and
never of a sibling on the same level (``check`` and ``codegen_c`` both read the
IR after the passes; neither uses the other).  Module-level imports are checked
strictly; imports inside functions (deferred, to break a cycle or to skip a heavy
dependency) are checked too, against their own allow-list.  The allow-lists name
today's known exceptions: they may only shrink -- an entry that no longer occurs
fails the test, so a fixed exception is removed from the list in the same commit.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tlxc"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# lowest first; the names on one level are siblings
LEVELS: list[set[str]] = [
    {"errors", "__version__"},                        # diagnostics: no tlxc imports
    {"target"},                                       # the target registry (Target, TARGETS)
    {"arch"},                                         # the spellings of targets a user may write
    {"options"},                                      # CompileOptions: what one compile depends on
    {"ir"},                                           # types, ops, layouts, verifier, text form
    {"descriptors"},                                  # host TMA descriptors (TensorDescriptor): launch-argument types
    {"language"},                                     # tl.* / tlx.* as the user writes them
    {"frontend"},                                     # Python AST -> IR
    {"passes"},                                       # IR -> IR
    {"check", "codegen_c"},                           # read the IR after the passes: the checker, C-style lowering
    {"codegen_nvptx", "codegen_amdgcn"},              # one backend per vendor (CUDA / HIP)
    {"compiler"},                                     # the compile driver: frontend -> passes -> target.backend
    {"runtime"},                                      # launches, caches, descriptors, autotuning
    {"interpreter"},                                  # the CPU executor (binds arguments as the runtime does)
    {"host", "torch_ops", "trace_render", "testing", "_internal_testing", "tools", "profiler", "_C"},
    {"compat"},                                       # Triton-compatible names over the modules above
    {"ops"},                                          # ready-made operators (tlxc.ops.matmul): kernels + host code
    {"cli_kernels"},
    {"cli_trace"},
    {"cli"},
    {"__init__", "__main__"},                         # the package's public surface
]
LEVEL = {name: i for i, names in enumerate(LEVELS) for name in names}

# Known exceptions at module level: (importing module, imported module).  Only shrinks.
MODULE_LEVEL_EXCEPTIONS = {
    # tl.* builtins defined with the runtime's @jit (helpers called from kernels)
    ("tlxc.language.random", "tlxc.runtime.jit"),
    ("tlxc.language.standard", "tlxc.runtime.jit"),
    ("tlxc.language.tlx.warp_spec", "tlxc.runtime.jit"),
}

# Known exceptions inside functions (deferred imports).  Only shrinks.
DEFERRED_EXCEPTIONS = {
    # tlxc check --run runs the file's inputs on the interpreter
    ("tlxc.check.run", "tlxc.interpreter"),
    # the reproducer directory lives in the runtime's cache directory
    ("tlxc.codegen_nvptx.reproducer", "tlxc.runtime.cache"),
    # the Triton-compatible driver object hands out tlxc.testing.do_bench
    ("tlxc.runtime.driver_api", "tlxc.testing"),
    # TLXC_INTERPRET=1: a launch runs on the interpreter instead
    ("tlxc.runtime.launch", "tlxc.interpreter"),
    # warmup specializes as the interpreter's launch does (one function for both paths)
    ("tlxc.runtime.warmup", "tlxc.interpreter.launch"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(source: str, name: str, is_package: bool = False) -> list[tuple[str, int, bool]]:
    """(imported tlxc module, line, at module level) of every import in module ``name``'s source."""
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    found = []

    def visit(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top) for a in child.names if a.name.split(".")[0] == "tlxc")
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] != "tlxc":
                    continue
                if child.module is None:       # from . import x, y: each names a module (or an attribute)
                    found.extend((f"{target}.{a.name}", child.lineno, top) for a in child.names)
                else:
                    found.append((target, child.lineno, top))
            else:
                visit(child, inner)

    visit(tree, True)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _goes_up(importer: str, imported: str) -> bool:
    mine, theirs = _layer(importer), _layer(imported)
    if theirs == mine:
        return False
    assert theirs in LEVEL, f"{importer} imports {imported}: '{theirs}' has no level in LEVELS"
    return LEVEL[theirs] >= LEVEL[mine]


def _violations() -> tuple[dict, dict]:
    """{(importer, imported): 'file:line'} of the imports that go up or sideways, at module
    level and deferred."""
    top, deferred = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        mine = _layer(importer)
        assert mine in LEVEL, f"{importer}: package '{mine}' has no level in tests/test_layering.py LEVELS"
        for imported, line, at_top in _imports(path.read_text(), importer, path.name == "__init__.py"):
            if _goes_up(importer, imported):
                where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                (top if at_top else deferred).setdefault((importer, imported), where)
    return top, deferred


def test_module_level_imports_go_down():
    top, _ = _violations()
    new = {pair: where for pair, where in top.items() if pair not in MODULE_LEVEL_EXCEPTIONS}
    assert not new, "imports of a later or sibling layer at module level (see docs/architecture.md, Layers):\n" + \
        "\n".join(f"  {where}: {a} imports {b}" for (a, b), where in sorted(new.items()))


def test_deferred_imports_go_down():
    _, deferred = _violations()
    new = {pair: where for pair, where in deferred.items() if pair not in DEFERRED_EXCEPTIONS}
    assert not new, "imports of a later or sibling layer inside functions:\n" + \
        "\n".join(f"  {where}: {a} imports {b}" for (a, b), where in sorted(new.items()))


def test_known_exceptions_still_exist():
    """The allow-lists only shrink: a fixed exception must leave the list."""
    top, deferred = _violations()
    stale = sorted((MODULE_LEVEL_EXCEPTIONS - top.keys()) | (DEFERRED_EXCEPTIONS - deferred.keys()))
    assert not stale, f"fixed, remove from the allow-list in tests/test_layering.py: {stale}"


def test_the_scan_sees_upward_and_sideways_imports():
    """The scan itself works: relative imports resolve, levels and siblings are told apart."""
    source = ("from ..compiler import compile_kernel\n"
              "from . import core\n"
              "def f():\n    from ..runtime import jit\n")
    found = _imports(source, "tlxc.ir.probe")
    assert found == [("tlxc.compiler", 1, True), ("tlxc.ir.core", 2, True), ("tlxc.runtime", 4, False)]
    assert _goes_up("tlxc.ir.probe", "tlxc.compiler") and not _goes_up("tlxc.ir.probe", "tlxc.ir.core")
    assert _goes_up("tlxc.codegen_c.rules_memory", "tlxc.check.resources")     # siblings
    assert not _goes_up("tlxc.codegen_c.rules_memory", "tlxc.passes.uniformity")  # down


def _picture_levels() -> list[set[str]]:
    """The levels of docs/architecture.md's picture (section Layers), lowest first: one line per
    level, siblings split by '│', 'a ▸ b' for a above b."""
    text = ARCHITECTURE.read_text().split("## Layers", 1)[1].split("```", 2)[1]
    levels = []
    for line in text.strip("\n").splitlines():
        names = line.strip().split("  ")[0]             # the packages, before the description
        for part in names.split("▸"):
            levels.append({n.strip().replace("tlxc/", "") for chunk in part.split("│") for n in chunk.split(",")})
    return levels[::-1]


def test_the_architecture_picture_shows_these_levels():
    """docs/architecture.md's package graph is this file's LEVELS (the private modules aside)."""
    private = {"__version__", "_internal_testing"}
    assert _picture_levels() == [names - private for names in LEVELS]
