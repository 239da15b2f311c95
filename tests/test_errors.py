"""Every misuse a user can write gives a CompilationError at the user's line.

The corpus lives in ``tests/error_kernels.py``: one kernel per mistake, the
offending line marked ``# <-``.  Each case names the kernel, the text the caret
must start under on the marked line (this fixes the exact column), and a
substring of the message.  The expected line is where the marker is, so the
corpus can grow without renumbering anything here.
"""
from __future__ import annotations

import inspect
import linecache
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, InternalCompilerError

sys.path.insert(0, str(Path(__file__).parent))
import error_kernels as corpus

MARKER = "# <-"


@dataclass(frozen=True)
class Case:
    kernel: str            # function in error_kernels.py that is compiled
    anchor: str            # the caret starts under the first occurrence of this on the marked line
    message: str           # a substring of the error message
    where: str | None = None   # the function holding the marker, when not the kernel (helpers)
    notes: int | None = None   # how many notes the error carries, when it matters

    def __str__(self) -> str:
        return self.kernel


CASES = [
    # unsupported Python syntax
    Case("lambda_expr", "lambda", "lambda can only capture constexpr values; 'v' is a runtime value"),
    Case("try_stmt", "try", "'try' is not supported in a kernel"),
    Case("with_stmt", "with", "the only 'with' blocks a kernel may contain are 'with tlx.async_tasks():'"),
    Case("class_def", "class", "class definitions are not supported in a kernel"),
    Case("list_comprehension", "tl.arange", "a comprehension in a kernel iterates over a compile-time tuple, list "
                                             "or range"),
    Case("dict_literal", "{", "dicts are not supported in a kernel"),
    Case("break_stmt", "break", "'break' is not supported in a kernel loop"),
    Case("continue_stmt", "continue", "'continue' is not supported in a kernel loop"),
    Case("global_stmt", "global", "'global' is not supported in a kernel"),
    Case("nested_def", "def", "nested function definitions are not supported"),
    Case("pow_on_tensor", "v ** 2", "'**' is not supported on runtime values"),
    Case("starred_assignment", "*rest", "starred assignment (a, *rest = ...) is not supported"),
    Case("yield_expr", "yield", "'yield' is not supported: a kernel is not a generator"),
    Case("walrus", "m :=", "assignment expressions (:=) are not supported"),
    Case("for_over_list", "[1, 2, 3]", "must iterate over range(...), tl.range(...) or tl.static_range(...)"),
    Case("raise_stmt", "raise", "'raise' is not supported in a kernel"),
    Case("import_in_kernel", "import", "imports are not supported inside a kernel"),
    Case("matmul_operator", "a @ a", "'@' is not supported in a kernel; use tl.dot(a, b)"),
    # names and attributes
    Case("undefined_name", "ofset", "undefined name 'ofset'; did you mean 'offset'?"),
    Case("unknown_builtin", "tl.exp3", "module 'tl' has no attribute 'exp3'; did you mean 'exp'?"),
    Case("unknown_tensor_attribute", "v.foo", "a tensor has no attribute 'foo'"),
    Case("global_numpy_array", "TABLE", "global 'TABLE' of type ndarray cannot be used in a kernel"),
    # shapes
    Case("binop_shape_mismatch", "a + b", "cannot broadcast [64] and [32] (dimension 0: 64 vs 32)"),
    Case("dot_inner_dims", "tl.dot", "tl.dot: inner dimensions differ: input is 32x64 but other is 32x32"),
    Case("dot_too_small", "tl.dot", "tl.dot: M, N and K must be at least 16, got M=8, N=32, K=32"),
    Case("dot_dtype_mismatch", "tl.dot", "tl.dot: operands must have one type, got f16 and bf16"),
    Case("dot_acc_shape", "acc)", "tl.dot: 'acc' has shape [16, 16], expected [32, 32]"),
    Case("reshape_numel", "tl.reshape", "cannot reshape [64] (64 elements) to [4, 8] (32 elements)"),
    Case("store_shape_mismatch", "v)", "tl.store: 'value' of shape [32] does not match the pointer shape [16]"),
    Case("integer_mask", "offs)", "tl.load: 'mask' must be a boolean tensor (a comparison such as offs < n), "
                                  "got a tensor of type tensor<16xi32>"),
    Case("float_mask_store", "v)", "tl.store: 'mask' must be a boolean tensor"),
    Case("mask_shape_mismatch", "mask)", "tl.load: 'mask' of shape [32] does not match the pointer shape [16]"),
    Case("reduce_axis_out_of_range", "1)", "tl.sum: axis 1 is out of range for a tensor of rank 1"),
    # compile-time constants required
    Case("arange_runtime_bound", "n)", "tl.arange: 'end' must be a compile-time constant (tl.constexpr), "
                                       "got a runtime scalar of type i32"),
    Case("zeros_runtime_shape", "(n,)", "tl.zeros: 'shape' must be a tuple of compile-time integers, but "
                                        "dimension 0 is a runtime scalar of type i32"),
    Case("reduce_runtime_axis", "axis)", "tl.sum: 'axis' must be a compile-time constant"),
    Case("arange_not_power_of_two", "tl.arange", "tl.arange: the range's length end - start must be a power "
                                                 "of two, got 100"),
    Case("static_assert_fails", "tl.static_assert", "tl.static_assert failed: BLOCK must be a multiple of 32"),
    Case("assert_false_constexpr", "BLOCK % 32", "assertion failed: BLOCK must be a multiple of 32"),
    # as in Triton, a runtime value bound to a helper's tl.constexpr parameter stays runtime:
    # the error is where a constant is needed, with the call as a note
    Case("helper_runtime_constexpr", "N)", "tl.arange: 'end' must be a compile-time constant",
         where="_helper_with_constexpr", notes=1),
    Case("static_range_runtime", "n)", "tl.static_range bounds must be compile-time constants"),
    Case("static_range_too_long", "tl.static_range", "unrolls 10000 iterations; at most 4096"),
    Case("constexpr_annotation_runtime", "n + 1", "'B' is annotated tl.constexpr but its value is a runtime"),
    Case("runtime_constexpr_option", "n)", "tl.load: 'cache_modifier' must be a compile-time constant"),
    Case("program_id_axis", "3", "tl.program_id: 'axis' must be 0, 1 or 2, got 3"),
    Case("hint_float_values", "16.5", "tl.multiple_of: 'values' must be positive compile-time integers"),
    # calls
    Case("helper_wrong_arg_count", "_add_two", "_add_two(): missing a required argument: 'b'"),
    Case("builtin_wrong_arg_count", "1)", "tl.program_id(): takes 1 positional argument (axis) but 2 were given"),
    Case("unexpected_keyword", "None", "tl.load(): got an unexpected keyword argument 'maske'; did you mean "
                                       "'mask'?"),
    Case("python_function_runtime", "plain_python_function",
         "cannot call Python function 'plain_python_function' with runtime values; decorate it with @tlxc.kernel"),
    Case("python_min_runtime", "min", "Python's min() on runtime values takes no keyword arguments (got key)"),
    Case("recursion", "_recursive(v", "recursion is not supported in a kernel (_recursive() calls itself)",
         where="_recursive"),
    Case("dtype_called", "tl.float16", "calling a dtype converts one value: f16(x), x.to(f16)"),
    Case("range_outside_for", "range", "range(...) can only be used as the iterable of a 'for' loop"),
    Case("range_step_zero", "range", "range's step must not be zero"),
    # dtypes
    Case("bitwise_on_floats", "v & v", "'&' needs integer operands, got f32 and f32"),
    Case("floordiv_on_floats", "v // 2.0", "'//' needs integer operands, got f32 and f32"),
    Case("pointer_times_pointer", "x * y", "'*' is not defined on pointers (ptr<f32> and ptr<f32>)"),
    Case("pointer_plus_float", "x + 1.5", "pointer offsets must be integers, got f32"),
    Case("load_non_pointer", "n + tl", "tl.load: 'pointer' must be a pointer or a tensor of pointers, got a "
                                       "tensor of type tensor<16xi32>"),
    Case("where_pointer_mix", "tl.where", "tl.where needs x and y of one pointer type, got ptr<f32> and i32"),
    Case("other_without_mask", "0.0)", "tl.load: 'other' is only meaningful with a 'mask'"),
    Case("invert_float", "~v", "'~' needs an integer operand, got f32"),
    Case("store_string_value", '"hello"', "tl.store: 'value' must be a tensor or a number, got str 'hello'"),
    Case("abs_of_pointer", "x)", "tl.abs: 'x' must hold numbers, got a runtime scalar of type ptr<f32>"),
    Case("cast_pointer_to_float", "x.to", "x.to: cannot convert ptr<f32> to f32"),
    Case("full_with_pointer_value", "x,", "tl.full: 'value' is a runtime scalar of type ptr<f32>, but the "
                                          "memory holds f32"),
    Case("compare_with_none", "n == None", "cannot compare a runtime value with None"),
    Case("string_plus_tensor", 'n + "s"', "unsupported operands for '+': a runtime scalar of type i32 and str"),
    Case("mixed_signedness_division", "u // n", "mixed signedness (u32 and i32)"),
    Case("unpack_tensor", "a, b", "cannot unpack a runtime scalar of type f32 into 2 names"),
    # control flow and the types it carries
    Case("loop_carried_int_to_float", "acc = acc", "loop-carried variable 'acc' has type i32 before the loop "
                                                   "but f32 at the end of its body", notes=2),
    Case("loop_carried_f32_to_bf16", "acc = acc", "'acc' has type tensor<16xf32> before the loop but "
                                                  "tensor<16xbf16>", notes=2),
    Case("while_carried_shape_change", "acc =", "'acc' has type tensor<16xf32> before the loop but "
                                                "tensor<32xf32>", notes=2),
    Case("loop_carried_float_literal", "i = 1.5", "'i' has type i32 before the loop but becomes float 1.5"),
    Case("constexpr_changed_in_loop", "scale", "loop-carried variable 'scale' holds int 1 before the loop but "
                                               "becomes str 'fast' inside it"),
    Case("constexpr_becomes_tensor_in_loop", "dt =", "'dt' holds a compile-time value (the dtype f32) before "
                                                     "this runtime loop"),
    Case("if_branches_differ", "if", "'v' has type f32 in the then-branch but bf16 in the else-branch", notes=2),
    Case("if_literal_mismatch", "if", "'v' has type i32 in the then-branch but float 1.5 in the else-branch"),
    Case("defined_in_one_branch", "v)", "'v' may be undefined here: 'v' is assigned in only one branch"),
    Case("defined_in_loop", "v)", "'v' may be undefined here: 'v' is defined inside the loop"),
    Case("loop_variable_after_loop", "i,", "the loop variable 'i' is not available after the loop"),
    Case("return_in_loop", "return", "'return' inside a loop is not supported in a kernel"),
    Case("kernel_returns_value", "return", "a kernel cannot return a value"),
    Case("tensor_if_condition", "v > 0", "an 'if' condition must be a scalar, got a tensor of shape [16]"),
    Case("tensor_while_condition", "v > 0", "a 'while' condition must be a scalar, got a tensor of shape [16]"),
    # tensors are values, not arrays
    Case("tensor_int_index", "0]", "tensors can only be indexed with ':' and None"),
    Case("tensor_item_assignment", "v[0]", "tensors are immutable: item assignment is not supported"),
    Case("tensor_augassign_subscript", "v[0]", "tensors are immutable: item assignment is not supported"),
    Case("tensor_partial_slice", "2:4", "only full slices ':' are supported when indexing a tensor"),
    Case("attribute_assignment", "v.dtype", "attribute assignment is not supported in a kernel"),
    # an error inside a helper points at the helper, with a note at the call
    Case("error_in_helper", "v + tl", "cannot broadcast [16] and [32]", where="_bad_helper", notes=1),
]


def expected_position(case: Case) -> tuple[int, int]:
    fn = getattr(corpus, case.where or case.kernel).fn
    lines, first = inspect.getsourcelines(fn)
    marked = [i for i, line in enumerate(lines) if line.rstrip().endswith(MARKER)]
    assert len(marked) == 1, f"{fn.__name__} must have exactly one '{MARKER}' line"
    line = lines[marked[0]]
    assert case.anchor in line, f"anchor {case.anchor!r} is not on the marked line of {fn.__name__}"
    return first + marked[0], line.index(case.anchor)


def source_line(loc) -> str:
    return linecache.getline(loc.file, loc.line).rstrip("\n")


def compile_error(case: Case) -> CompilationError:
    kernel = getattr(corpus, case.kernel)
    with pytest.raises(CompilationError) as info:
        kernel.compile(stages=("ir",))
    return info.value


def test_corpus_is_large_and_every_kernel_has_a_case():
    kernels = {name for name, obj in vars(corpus).items()
               if isinstance(obj, tlxc.KernelFunction) and not name.startswith("_")}
    covered = {case.kernel for case in CASES}
    assert len(CASES) >= 30
    assert kernels == covered, f"kernels without a case: {sorted(kernels - covered)}"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_error(case: Case):
    err = compile_error(case)
    line, col = expected_position(case)
    assert not isinstance(err, InternalCompilerError), str(err)
    assert case.message in err.message
    assert err.loc is not None
    assert (err.loc.line, err.loc.col) == (line, col), str(err)
    assert os.path.basename(err.loc.file) == "error_kernels.py"
    if case.notes is not None:
        assert len(err.notes) == case.notes, str(err)
    # The rendering: file:line:col: error: <sentence>, the source line, a caret under the span.
    text = str(err).splitlines()
    assert re.fullmatch(rf".*error_kernels\.py:{line}:{col}: error: .+", text[0]), text[0]
    assert case.message in text[0]
    source = inspect.getsourcelines(getattr(corpus, case.where or case.kernel).fn)
    assert text[1] == source[0][line - source[1]].rstrip("\n")
    assert re.fullmatch(rf" {{{col}}}\^~*", text[2]), text[2]
    if err.loc.end_col is not None:
        assert len(text[2].strip()) == err.loc.end_col - err.loc.col


def test_caret_underlines_the_whole_span():
    err = compile_error(Case("binop_shape_mismatch", "a + b", ""))
    assert str(err).splitlines()[2].strip() == "^~~~~"  # a + b


def test_notes_point_at_the_other_side():
    err = compile_error(Case("loop_carried_int_to_float", "", ""))
    (first, before), (second, loop) = err.notes
    assert "is set before the loop here" in first
    assert source_line(before) == "    acc = 0"
    assert "in this loop" in second
    assert source_line(loop).lstrip().startswith("for i in range(n)")
    rendered = str(err)
    assert f"error_kernels.py:{before.line}:{before.col}: note: 'acc' is set before the loop here" in rendered


def test_helper_error_names_the_call_site():
    err = compile_error(Case("error_in_helper", "", ""))
    (text, call), = err.notes
    assert text == "in _bad_helper(), called from here"
    assert "_bad_helper(v)" in source_line(call)


def test_recursion_notes_do_not_repeat():
    err = compile_error(Case("recursion", "", ""))
    assert len({where for _, where in err.notes}) == len(err.notes) <= 4


# -- errors raised at the Python level -------------------------------------------------------------
def test_builtin_outside_kernel():
    with pytest.raises(CompilationError) as info:
        tl.program_id(0)  # the location below is this line
    err = info.value
    assert "tl.program_id called outside a kernel: did you forget @tlxc.kernel?" in str(err)
    assert err.loc is not None and os.path.basename(err.loc.file) == "test_errors.py"
    _, first = inspect.getsourcelines(test_builtin_outside_kernel)
    assert err.loc.line == first + 2
    if sys.version_info >= (3, 11):
        assert err.loc.col == 8
        assert str(err).splitlines()[2] == " " * 8 + "^" + "~" * (len("tl.program_id(0)") - 1)


@pytest.mark.parametrize("call", [lambda: tl.arange(0, 16), lambda: tl.load(None),
                                  lambda: tl.zeros((4,), tl.float32), lambda: list(tl.static_range(4)),
                                  lambda: list(tl.range(4))])
def test_every_builtin_says_did_you_forget(call):
    with pytest.raises(CompilationError, match="did you forget @tlxc.kernel"):
        call()


def test_calling_a_kernel_from_python():
    with pytest.raises(CompilationError) as info:
        corpus.lambda_expr(1)
    assert "launch it with lambda_expr[grid](...)" in str(info.value)


def test_missing_constexpr_value():
    with pytest.raises(CompilationError, match="missing value for constexpr parameter 'BLOCK'"):
        _needs_block.compile(constexprs={}, stages=("ir",))


@tlxc.kernel
def _needs_block(x: corpus.f32p, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), 0.0)


# -- how errors surface: a short report, not tlxc's internals -------------------------------------
_SCRIPT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{root!r}, {tests!r}]
    import error_kernels
    error_kernels.binop_shape_mismatch.compile()
""")


def _run_failing_compile(debug: bool) -> str:
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env.pop("TLXC_DEBUG", None)
    if debug:
        env["TLXC_DEBUG"] = "1"
    script = _SCRIPT.format(root=str(root), tests=str(root / "tests"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                            timeout=120, check=False)
    assert result.returncode == 1
    return result.stderr


def test_traceback_hides_compiler_internals():
    stderr = _run_failing_compile(debug=False)
    assert re.search(r"error_kernels\.py:\d+:\d+: error: shape mismatch", stderr), stderr
    assert "During handling of the above exception" not in stderr
    # The rule's own error is chained as __cause__ (Triton does so, and its tests read
    # err.__cause__), but printed as its one line: no frames of tlxc's above the separator.
    cause, separator, _ = stderr.partition("The above exception was the direct cause")
    assert separator and 'File "' not in cause and "shape mismatch" in cause, stderr
    frames = re.findall(r'File "([^"]+)"', stderr)
    assert not any(f.endswith(("semantic.py", "builtins.py")) for f in frames), stderr
    assert sum(f.endswith("build_ir.py") for f in frames) <= 1, stderr
    assert len(frames) <= 8, stderr


def _pick_format(dtype):
    if dtype == tl.float16:
        raise ValueError("only the 8-bit formats have a name here")
    return "fp8"


@tlxc.kernel
def _rule_error(x: corpus.f32p):
    tl.store(x + tl.arange(0, 8), tl.zeros((4,), tl.float32))


@tlxc.kernel
def _compile_time_call_error(x: corpus.f32p, D: tl.constexpr):
    name: tl.constexpr = _pick_format(D)
    tl.store(x, len(name))


def test_the_underlying_error_is_chained_as_cause():
    """As in Triton, ``CompilationError.__cause__`` is the error the typing rule or the user's
    compile-time function raised, carrying its message; it has no traceback, so it adds no frames
    to the report (test above)."""
    with pytest.raises(CompilationError) as info:
        _rule_error.compile()
    cause = info.value.__cause__
    assert cause is not None and "[8]" in str(cause) and cause.__traceback__ is None
    assert "error_kernels" not in str(cause)                       # the bare message; the location is ours
    with pytest.raises(CompilationError, match="failed at compile time") as info:
        _compile_time_call_error.compile(constexprs={"D": tl.float16})
    cause = info.value.__cause__
    assert isinstance(cause, ValueError) and "only the 8-bit formats" in str(cause)
    assert cause.__traceback__ is None and cause.__context__ is None


def test_tlxc_debug_keeps_the_full_traceback():
    stderr = _run_failing_compile(debug=True)
    frames = re.findall(r'File "([^"]+)"', stderr)
    assert sum(f.endswith("build_ir.py") for f in frames) > 3, stderr


def test_internal_errors_are_reported_as_tlxc_bugs(monkeypatch):
    from tlxc.frontend import builtins as B

    def broken_rule(ctx, *args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setitem(B.RULES, "program_id", broken_rule)
    monkeypatch.delenv("TLXC_DEBUG", raising=False)
    with pytest.raises(InternalCompilerError) as info:
        _uses_program_id.compile(stages=("ir",))
    err = info.value
    assert "internal compiler error (KeyError: 'boom'); this is a tlxc bug" in err.message
    _, first = inspect.getsourcelines(_uses_program_id.fn)
    assert err.loc.line == first + 2
    monkeypatch.setenv("TLXC_DEBUG", "1")
    with pytest.raises(KeyError):
        _uses_program_id.compile(stages=("ir",))


@tlxc.kernel
def _uses_program_id(x: corpus.f32p):
    tl.store(x, tl.program_id(0).to(tl.float32))
