"""Mutation fuzzing: no input makes tlxc crash or hang.

Each case takes one of the project's own kernel files (``examples/*.py``,
``tests/kernels_*.py``), applies one random AST mutation inside a
``@tlxc.kernel`` function (swap operands, change a constant or a shape, drop an
argument, put another in-scope name in a name's place, wrap a value in a tlx
object, change an operator or a ``tl.*`` function, delete a statement), writes
the mutated file next to the originals' siblings and compiles its kernels to
CUDA source (``ir``, ``ir.opt`` and the NVIDIA rendering; no NVRTC).  A case
passes when it compiles, or fails with a located ``TlxcError`` that is not an
``InternalCompilerError``; it fails on any other exception, an error without a
location, or a compile over ``CASE_SECONDS``.

The suite runs a fixed seed for at most ``TLXC_FUZZ_SECONDS`` (default 12 s: the suite's share; longer hunts set it).
For a longer local hunt: ``python tests/test_fuzz.py --seeds 0:2000`` prints
every failing seed with its mutation and the error (``--keep DIR`` saves the
mutated files; ``--mutations 3`` applies three mutations to each case; ``--run``
also interprets the launches of the files' ``check_inputs()``).
"""
from __future__ import annotations

import ast
import collections
import copy
import importlib.util
import os
import random
import signal
import sys
import time
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from tlxc.errors import InternalCompilerError, TlxcError, VerificationError

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")) + \
    sorted((ROOT / "tests").glob("kernels_*.py"))
CASE_SECONDS = 60
SUITE_SECONDS = float(os.environ.get("TLXC_FUZZ_SECONDS", "12"))
SUITE_SEED = int(os.environ.get("TLXC_FUZZ_SEED", "0"))

# Values a mutation may put in an expression's place: numbers at the edges, shapes,
# compile-time objects of the wrong kind, and tlx objects (barriers, buffers).
REPLACEMENTS = [
    "0", "1", "-1", "3", "7", "2 ** 20", "2 ** 31", "2 ** 64", "0.5", "float('nan')", "float('inf')",
    "True", "None", "'a'", "(128,)", "(16, 16)", "[64]", "tl.float32", "tl.int8", "tl.pointer_type(tl.float16)",
    "tlx.alloc_barriers(1)", "tlx.alloc_barriers(2)[0]", "tlx.local_alloc((16,), tl.float32, 2)",
    "tlx.local_alloc((16, 16), tl.float16, 1)[0]", "tl.arange(0, 16)", "tl.arange(0, 4096)[:, None]",
    "tl.zeros((16, 16), tl.float32)", "tl.program_id(0)", "tl.full((2,), 1, tl.int1)",
]
INT_CONSTANTS = [0, 1, -1, 2, 3, 5, 16, 17, 64, 4096, 2**20, 2**21, 2**31, -2**31 - 1]
FLOAT_CONSTANTS = [0.0, -0.0, 1.5, float("nan"), float("inf"), 1e300]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift,
          ast.BitAnd, ast.BitOr, ast.BitXor, ast.Pow, ast.MatMult]
CMPOPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq]
TL_FUNCTIONS = ["sum", "max", "min", "argmax", "cumsum", "exp", "sqrt", "abs", "trans", "reshape", "load",
                "store", "where", "maximum", "minimum", "dot", "arange", "full", "zeros", "broadcast_to",
                "expand_dims", "program_id", "num_programs", "atomic_add", "sigmoid", "fma", "cast", "join",
                "split", "sort", "flip", "umulhi", "clamp", "reduce", "associative_scan", "static_assert"]
TLX_FUNCTIONS = ["local_alloc", "local_load", "local_store", "local_view", "alloc_barriers", "barrier_wait",
                 "barrier_arrive", "barrier_expect_bytes", "async_load", "async_load_commit_group",
                 "async_load_wait_group", "async_dot", "async_dot_wait", "local_trans", "fence_async_shared",
                 "async_descriptor_load", "async_descriptor_store", "async_task", "named_barrier_wait"]


# -- mutations ------------------------------------------------------------------------------------

def kernel_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The functions decorated ``@tlxc.kernel`` (or ``@kernel``/``@tlxc.jit``) at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_kernel_decorator(d) for d in node.decorator_list):
            found.append(node)
    return found


def _is_kernel_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("kernel", "jit")


def _names_in_scope(fn: ast.FunctionDef) -> list[str]:
    names = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return sorted(names)


def _expression(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _candidates(fn: ast.FunctionDef, kind):
    return [n for stmt in fn.body for n in ast.walk(stmt) if isinstance(n, kind)]


def mutate(tree: ast.Module, rng: random.Random, compiled: frozenset[str] | None = None) -> str | None:
    """Apply one mutation to one kernel of ``tree`` in place (one of ``compiled``, the kernels a
    compile of the file reaches, when given); a sentence saying what, or None when the chosen
    mutation found nothing to change."""
    kernels = [fn for fn in kernel_functions(tree) if compiled is None or fn.name in compiled]
    if not kernels:
        return None
    fn = rng.choice(kernels)
    kind = rng.choice(list(MUTATIONS))
    what = MUTATIONS[kind](fn, rng)
    return f"{fn.name}: {what}" if what else None


def _swap_operands(fn, rng):
    nodes = _candidates(fn, (ast.BinOp, ast.Compare))
    if not nodes:
        return None
    node = rng.choice(nodes)
    if isinstance(node, ast.BinOp):
        node.left, node.right = node.right, node.left
    else:
        node.left, node.comparators[0] = node.comparators[0], node.left
    return f"swapped the operands at line {node.lineno}"


def _change_constant(fn, rng):
    nodes = [n for n in _candidates(fn, ast.Constant) if isinstance(n.value, (int, float))]
    if not nodes:
        return None
    node = rng.choice(nodes)
    old = node.value
    pool = FLOAT_CONSTANTS if isinstance(old, float) else INT_CONSTANTS
    if isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.4:
        node.value = rng.choice([old * 2, old // 2, old + 1, old - 1, -old])
    else:
        node.value = rng.choice(pool)
    return f"constant {old!r} -> {node.value!r} at line {node.lineno}"


def _drop_argument(fn, rng):
    nodes = [n for n in _candidates(fn, ast.Call) if n.args or n.keywords]
    if not nodes:
        return None
    node = rng.choice(nodes)
    if node.keywords and (not node.args or rng.random() < 0.5):
        dropped = node.keywords.pop(rng.randrange(len(node.keywords)))
        return f"dropped keyword {dropped.arg} at line {node.lineno}"
    node.args.pop(rng.randrange(len(node.args)))
    return f"dropped a positional argument at line {node.lineno}"


def _add_argument(fn, rng):
    nodes = _candidates(fn, ast.Call)
    if not nodes:
        return None
    node = rng.choice(nodes)
    value = _expression(rng.choice(REPLACEMENTS))
    if rng.random() < 0.5:
        node.args.append(value)
        return f"added a positional argument at line {node.lineno}"
    key = rng.choice(["mask", "other", "axis", "num_warps", "dtype", "keep_dims", "propagate_nan", "acc",
                      "num_stages", "registers", "replicate", "bitcast", "sem", "scope", "layout"])
    node.keywords = [k for k in node.keywords if k.arg != key] + [ast.keyword(arg=key, value=value)]
    return f"added {key}= at line {node.lineno}"


def _replace_name(fn, rng):
    names = _names_in_scope(fn)
    nodes = [n for n in _candidates(fn, ast.Name) if isinstance(n.ctx, ast.Load) and n.id in names]
    if not nodes or len(names) < 2:
        return None
    node = rng.choice(nodes)
    old, node.id = node.id, rng.choice([n for n in names if n != node.id])
    return f"name {old} -> {node.id} at line {node.lineno}"


class _Replace(ast.NodeTransformer):
    def __init__(self, target, replacement):
        self.target, self.replacement = target, replacement

    def visit(self, node):
        if node is self.target:
            return self.replacement
        return super().visit(node)


def _replace_expression(fn, rng):
    nodes = [n for n in _candidates(fn, ast.expr) if not isinstance(getattr(n, "ctx", None), ast.Store)]
    if not nodes:
        return None
    node = rng.choice(nodes)
    text = rng.choice(REPLACEMENTS)
    replacement = ast.copy_location(_expression(text), node)
    for stmt_index, stmt in enumerate(fn.body):
        fn.body[stmt_index] = _Replace(node, replacement).visit(stmt)
    return f"expression at line {node.lineno} -> {text}"


def _change_operator(fn, rng):
    nodes = _candidates(fn, (ast.BinOp, ast.Compare, ast.AugAssign))
    if not nodes:
        return None
    node = rng.choice(nodes)
    if isinstance(node, ast.Compare):
        node.ops[0] = rng.choice(CMPOPS)()
    else:
        node.op = rng.choice(BINOPS)()
    return f"changed an operator at line {node.lineno}"


def _change_function(fn, rng):
    nodes = [n for n in _candidates(fn, ast.Attribute) if isinstance(n.value, ast.Name)
             and n.value.id in ("tl", "tlx")]
    if not nodes:
        return None
    node = rng.choice(nodes)
    old = node.attr
    node.attr = rng.choice(TL_FUNCTIONS if node.value.id == "tl" else TLX_FUNCTIONS)
    return f"{node.value.id}.{old} -> {node.value.id}.{node.attr} at line {node.lineno}"


def _delete_statement(fn, rng):
    bodies = [n.body for n in ast.walk(fn) if isinstance(getattr(n, "body", None), list) and n.body]
    bodies += [n.orelse for n in ast.walk(fn) if isinstance(getattr(n, "orelse", None), list) and n.orelse]
    body = rng.choice(bodies)
    index = rng.randrange(len(body))
    line = body[index].lineno
    body[index] = ast.copy_location(ast.Pass(), body[index])
    return f"deleted the statement at line {line}"


def _negate(fn, rng):
    nodes = [n for n in _candidates(fn, ast.expr) if isinstance(n, (ast.Name, ast.Call, ast.Subscript))
             and not isinstance(getattr(n, "ctx", None), ast.Store)]
    if not nodes:
        return None
    node = rng.choice(nodes)
    op = rng.choice([ast.USub, ast.Invert, ast.Not])()
    replacement = ast.copy_location(ast.UnaryOp(op=op, operand=copy.deepcopy(node)), node)
    for stmt_index, stmt in enumerate(fn.body):
        fn.body[stmt_index] = _Replace(node, replacement).visit(stmt)
    return f"{type(op).__name__} on the value at line {node.lineno}"


def _condition_on(fn, rng):
    """``if <value>:`` around the first statement: a truth test of any in-scope value."""
    names = _names_in_scope(fn)
    if not names or not fn.body:
        return None
    name = rng.choice(names)
    index = rng.randrange(len(fn.body))
    stmt = fn.body[index]
    fn.body[index] = ast.copy_location(ast.If(test=ast.Name(id=name, ctx=ast.Load()), body=[stmt], orelse=[]),
                                       stmt)
    return f"if {name}: around the statement at line {stmt.lineno}"


MUTATIONS = {
    "swap": _swap_operands, "constant": _change_constant, "drop": _drop_argument, "add": _add_argument,
    "name": _replace_name, "replace": _replace_expression, "operator": _change_operator,
    "function": _change_function, "delete": _delete_statement, "negate": _negate, "condition": _condition_on,
}


# -- running one case -----------------------------------------------------------------------------

class CaseTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Raise ``CaseTimeout`` in the main thread after ``seconds`` (no-op off the main thread)."""
    def expire(signum, frame):
        raise CaseTimeout(f"a compile took more than {seconds} s")
    try:
        previous = signal.signal(signal.SIGALRM, expire)
    except ValueError:          # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _arch_for(path: Path) -> str:
    return "sm_100a" if "blackwell" in path.stem or "tcgen05" in path.stem else "sm_90a"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _in_tlxc(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc`` is tlxc's own code (not the user's module)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and f"{os.sep}tlxc{os.sep}" in frames[-1].filename


def verdict(exc: BaseException) -> str | None:
    """None when ``exc`` is an acceptable answer to a bad kernel, else why not."""
    if isinstance(exc, CaseTimeout):
        return str(exc)
    if isinstance(exc, (InternalCompilerError, VerificationError)):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TlxcError):
        if exc.loc is None or exc.loc.line <= 0:
            return f"{type(exc).__name__} without a location: {exc}"
        return None
    return f"Python traceback ({type(exc).__name__}: {exc})\n" + "".join(traceback.format_tb(exc.__traceback__)[-4:])


def compile_file(path: Path, arch: str, module_name: str, run: bool = False) -> None:
    """Compile every kernel the file defines as ``tlxc compile`` would, through CUDA rendering;
    with ``run``, then interpret the launches of the file's ``check_inputs()`` (one schedule), as
    ``tlxc check --run`` does."""
    from tlxc.cli import UsageError, select_jobs, specialize_jobs
    from tlxc.codegen_nvptx.backend import render_kernel
    from tlxc.compiler import compile_kernel
    try:
        module = _load(path, module_name)
    except TlxcError:
        raise
    except Exception as exc:     # the mutated Python itself fails: not tlxc's business unless tlxc raised
        if _in_tlxc(exc):
            raise
        return
    jobs = select_jobs(module, str(path), None)
    try:
        specialize_jobs(jobs, {}, {}, {}, module)
    except UsageError:      # a kernel the file leaves without a -D value: the CLI's clean answer
        return
    for job in jobs:
        if job.spec is None:
            continue
        compiled = compile_kernel(job.kfn, job.spec, arch=arch, stages=("ir", "ir.opt"))
        render_kernel(compiled.module.kernels[0], arch)
    if run:
        _interpret_inputs(module, [job for job in jobs if job.spec is not None], arch)


def _interpret_inputs(module, jobs, arch: str) -> None:
    """Run the jobs' ``check_inputs()`` launches on the interpreter; a diagnosis is raised."""
    from tlxc.check.run import RunSetupError, inputs_hook, launches, run_kernel
    if inputs_hook(module) is None or not jobs:
        return
    try:
        found = launches(module, [job.name for job in jobs])
    except RunSetupError:
        return
    for job in jobs:
        launch = found.get(job.name) or found.get(job.attr)
        if launch is not None:
            grid, args, kwargs = launch
            diagnosis = run_kernel(job.kfn, grid, args, kwargs, seeds=(None,), arch=arch)
            if diagnosis is not None:
                raise diagnosis


_COMPILED: dict[Path, frozenset[str]] = {}
OUTCOMES: collections.Counter = collections.Counter()     # for main()'s summary


def compiled_kernels(path: Path) -> frozenset[str]:
    """The kernels an unmutated compile of ``path`` reaches: the specialized ones and the
    ``@tlxc.kernel`` helpers they call (inlined), found by name."""
    if path not in _COMPILED:
        from tlxc.cli import UsageError, select_jobs, specialize_jobs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = _load(path, f"tlxc_fuzz_original_{path.stem}")
        jobs = select_jobs(module, str(path), None)
        try:
            specialize_jobs(jobs, {}, {}, {}, module)
        except UsageError:
            jobs = []
        functions = {fn.name: fn for fn in kernel_functions(ast.parse(path.read_text()))}
        reached, todo = set(), [job.kfn.__name__ for job in jobs if job.spec is not None]
        while todo:
            name = todo.pop()
            if name in reached or name not in functions:
                continue
            reached.add(name)
            todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)]
            todo += [n.attr for n in ast.walk(functions[name]) if isinstance(n, ast.Attribute)]
        _COMPILED[path] = frozenset(reached)
    return _COMPILED[path]


def fuzzed_sources() -> list[Path]:
    return [p for p in SOURCES if compiled_kernels(p)]


def run_case(seed: int, workdir: Path, keep: Path | None = None,
             mutations: int = 1, run: bool = False) -> tuple[str | None, str | None]:
    """(what was mutated, failure or None) for the case of ``seed`` (``mutations`` in a row)."""
    rng = random.Random(seed)
    sources = fuzzed_sources()
    if run:                             # the files whose launches can be interpreted
        sources = [p for p in sources if "def check_inputs(" in p.read_text()]
    source = sources[rng.randrange(len(sources))]
    tree = ast.parse(source.read_text())
    done = []
    for _ in range(mutations):
        for _ in range(8):              # a mutation that found nothing to change: try another
            what = mutate(tree, rng, compiled_kernels(source))
            if what:
                done.append(what)
                ast.fix_missing_locations(tree)     # the next mutation reads line numbers
                break
    if not done:
        return None, None
    what = "; ".join(done)
    ast.fix_missing_locations(tree)
    text = ast.unparse(tree)
    target = workdir / f"fuzz{seed}_{source.name}"
    target.write_text(text)
    failure = None
    start = time.perf_counter()
    try:
        with time_limit(CASE_SECONDS), warnings.catch_warnings():
            warnings.simplefilter("ignore")     # SyntaxWarnings of the mutated source
            compile_file(target, _arch_for(source), f"tlxc_fuzz_{seed}", run)
    except RecursionError:
        pass            # the mutated module recursed in Python itself
    except BaseException as exc:  # noqa: BLE001 (judging every outcome is the point)
        if isinstance(exc, KeyboardInterrupt):
            raise
        failure = verdict(exc)
        OUTCOMES["located error" if failure is None else "failure"] += 1
    else:
        OUTCOMES["compiled"] += 1
    elapsed = time.perf_counter() - start
    if failure is None and elapsed > CASE_SECONDS:
        failure = f"the compile took {elapsed:.0f} s"
    if failure and keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / target.name).write_text(text)
    target.unlink()
    return f"{source.name}: {what}", failure


# -- the test -------------------------------------------------------------------------------------

def _prepare_path() -> None:
    for folder in (ROOT / "examples", ROOT / "tests"):      # the files import their siblings
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def test_mutated_kernels_give_located_errors(tmp_path):
    _prepare_path()
    deadline = time.monotonic() + SUITE_SECONDS
    failures, cases = [], 0
    seed = SUITE_SEED * 1_000_003
    while time.monotonic() < deadline:
        what, failure = run_case(seed, tmp_path)
        cases += what is not None
        if failure:
            failures.append(f"seed {seed}: {what}\n  {failure}")
        seed += 1
    assert cases > 0
    assert not failures, f"{len(failures)} of {cases} mutated kernels crashed tlxc:\n" + "\n".join(failures[:5])


def test_verdict_rejects_tracebacks_and_unlocated_errors():
    from tlxc.errors import CompilationError, Location
    assert verdict(CompilationError("bad", Location("k.py", 3, 1))) is None
    assert verdict(CompilationError("bad")) is not None
    assert verdict(InternalCompilerError("bug", Location("k.py", 3, 1))) is not None
    assert verdict(KeyError("x")) is not None
    assert verdict(CaseTimeout("slow")) is not None


@pytest.mark.parametrize("fault", ["traceback", "hang"])
def test_the_harness_reports_an_injected_fault(tmp_path, monkeypatch, fault):
    """End to end, not only verdict(): a compile that raises inside tlxc, or takes longer than
    CASE_SECONDS, fails its case."""
    import tlxc.compiler

    def broken(*args, **kwargs):
        if fault == "hang":
            time.sleep(5)
        raise KeyError("injected")
    monkeypatch.setattr(tlxc.compiler, "compile_kernel", broken)
    monkeypatch.setattr(sys.modules[__name__], "CASE_SECONDS", 0.5)
    _prepare_path()
    failures = [run_case(seed, tmp_path)[1] for seed in range(6)]
    words = "KeyError: 'injected'" if fault == "traceback" else "a compile took more than 0.5 s"
    assert any(f and words in f for f in failures), failures


def main(argv: list[str]) -> int:
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description="run many fuzz seeds and print the failing ones")
    parser.add_argument("--seeds", default="0:200", help="START:STOP")
    parser.add_argument("--keep", type=Path, default=None, help="save failing mutated files here")
    parser.add_argument("--mutations", type=int, default=1, help="mutations applied to each case")
    parser.add_argument("--run", action="store_true",
                        help="also interpret the check_inputs() launches of files that have them")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    _prepare_path()
    failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for seed in range(start, stop):
            what, failure = run_case(seed, Path(workdir), args.keep, args.mutations, args.run)
            if failure:
                failed += 1
                print(f"seed {seed}: {what}\n  {failure}\n", flush=True)
    print(f"{failed} failing of {stop - start} seeds ({dict(OUTCOMES)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
