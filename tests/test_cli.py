"""``tlxc compile`` / ``tlxc check``: outputs, kernel selection and exit codes."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

import tlxc
import tlxc.language as tl
from tlxc.cli import UsageError, main, parse_define_value
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))

ADD = '''
import tlxc
import tlxc.language as tl


@tlxc.kernel
def add(x_ptr: tl.pointer_type(tl.float32), out_ptr: tl.pointer_type(tl.float32), n: tl.int32,
        BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
'''


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- every example compiles to IR that parses back ----------------------------------------
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles_to_ir(example, tmp_path, capsys):
    arch = "sm_100a" if example.stem.startswith("blackwell") else "sm_90a"
    code, _out, err = run(capsys, "compile", example, "--arch", arch, "--emit", "ir", "-o", tmp_path)
    assert code == 0, err
    assert err == ""
    written = sorted(tmp_path.glob("*.ir"))
    assert written, f"no IR written for {example.name}"
    for path in written:
        text = path.read_text()
        module = parse_module(text)
        assert [k.attrs["sym_name"] for k in module.kernels] == [path.stem]
        assert print_module(module) == text


def test_every_example_is_tested():
    names = {p.stem for p in EXAMPLES}
    assert {"vector_add", "softmax", "rmsnorm", "layernorm", "matmul"} <= names


def test_ir_to_stdout_without_output_dir(tmp_path, capsys):
    path = write(tmp_path, "add_stdout.py", ADD)
    code, out, err = run(capsys, "compile", path, "--arch", "sm_100a")
    assert code == 0, err
    assert out.startswith("tl.kernel @add(%x_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32)")
    assert print_module(parse_module(out)) == out


def test_defines_and_num_warps_reach_the_ir(tmp_path, capsys):
    path = write(tmp_path, "add_defines.py", ADD)
    code, out, err = run(capsys, "compile", path, "--arch", "sm_90a", "-D", "BLOCK=512", "--num-warps", "8")
    assert code == 0, err
    assert "tensor<512xi32>" in out and "num_warps = 8" in out


def test_signature_types_an_unannotated_kernel(tmp_path, capsys):
    path = write(tmp_path, "plain.py", '''
        import tlxc
        import tlxc.language as tl


        @tlxc.kernel
        def scale(x_ptr, n, factor, BLOCK: tl.constexpr, DTYPE: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(x_ptr + offs, (x * factor).to(DTYPE), mask=offs < n)
    ''')
    code, out, err = run(capsys, "compile", path, "--arch", "sm_90a", "--signature", "x_ptr=*bf16, n=i32, factor=fp32",
                         "-D", "BLOCK=64", "-D", "DTYPE=bf16")
    assert code == 0, err
    assert "%x_ptr: ptr<bf16>, %n: i32, %factor: f32" in out
    assert "tensor<64xbf16>" in out


def test_signature_hints_specialize_as_a_launch_would(tmp_path, capsys):
    """``n=i32:16`` is what a launch with n = 4096 finds out: the masked
    loads and stores vectorize; ``n=i32:1`` folds n in as the constant 1."""
    import numpy as np

    from tlxc.frontend.specialize import specialization_from_args
    # 512 elements: 4 per thread of 4 warps, room for 16-byte vectors (a 128-element tile spreads
    # one element over each thread first, as Triton's coalescing does)
    path = write(tmp_path, "add_hints.py", ADD.replace("BLOCK: tl.constexpr = 128", "BLOCK: tl.constexpr = 512"))

    def cuda(hint: str) -> str:
        out = tmp_path / f"out{hint.replace(':', '_')}"
        code, _, err = run(capsys, "compile", path, "--arch", "sm_90a", "--signature", f"n=i32{hint}",
                           "--emit", "cuda", "-o", out)
        assert code == 0, err
        return (out / "add.cuda").read_text()

    plain, hinted, one = cuda(""), cuda(":16"), cuda(":1")
    assert "ld.global.v4.b32" not in plain and "ld.global.b32" in plain
    assert "ld.global.v4.b32" in hinted and "st.global.v4.b32" in hinted
    assert "int n" not in one and "int n" in plain

    kfn = runpy.run_path(str(path))["add"]
    x = np.random.rand(4096).astype(np.float32)
    launched = specialization_from_args(kfn, {"x_ptr": x, "out_ptr": x.copy(), "n": 4096, "BLOCK": 128})
    code, ir, err = run(capsys, "compile", path, "--arch", "sm_90a", "--signature", "n=i32:16")
    assert code == 0, err
    assert launched.divisibility["n"] == 16 and "arg_divisibility = [16, 16, 16]" in ir


@pytest.mark.parametrize("signature, message", [
    ("n=i32:8", "--signature: hint ':8' of 'n=i32:8': the hints are ':16' (divisible by 16) and ':1' (equal to 1)"),
    ("x_ptr=*fp32:1", "hint ':1' on pointer parameter 'x_ptr' of add: a pointer cannot equal 1"),
    ("n=fp32:16", "hint ':16' on parameter 'n' of add: hints apply to integers and pointers, not f32"),
    ("BLOCK=i32:16", "add has no runtime parameter(s) named BLOCK for the signature's hints"),
])
def test_bad_signature_hints_are_named(tmp_path, capsys, signature, message):
    path = write(tmp_path, "add_bad_hints.py", ADD)
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a", "--signature", signature)
    assert code != 0 and message in err, err


def test_amd_codegen_stages(tmp_path, capsys):
    path = write(tmp_path, "add_amd.py", ADD)
    code, out, err = run(capsys, "compile", path, "--arch", "gfx942", "--emit", "ir.opt")
    assert code == 0 and "tl.kernel @add" in out, err
    code, _, err = run(capsys, "compile", path, "--arch", "gfx950", "--emit", "cuda", "-o", tmp_path / "amd")
    assert code == 1
    assert "stage(s) cuda are not made for gfx950 (an AMD target; its code stages are hip, hsaco, amdgcn)" in err
    assert "internal compiler error" not in err
    code, out, err = run(capsys, "compile", path, "--arch", "gfx950", "--emit", "hip")
    assert code == 0 and 'extern "C" __global__' in out and "amdgpu_flat_work_group_size" in out, err


def test_string_annotations(tmp_path, capsys):
    path = write(tmp_path, "future.py", "from __future__ import annotations\n" + ADD)
    code, out, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 0, err
    assert "%x_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32" in out


def test_helpers_without_types_are_skipped(tmp_path, capsys):
    path = write(tmp_path, "with_helper.py", ADD + '''

@tlxc.kernel
def twice(x):
    return x * 2


@tlxc.kernel
def untyped(x_ptr):
    tl.store(x_ptr, 1.0)


@tlxc.kernel
def put(p, v):
    tl.store(p, v)


@tlxc.kernel
def caller(x_ptr: tl.pointer_type(tl.float32)):
    put(x_ptr, 2.0)
''')
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "-o", tmp_path / "out")
    assert code == 0, err
    # helpers (returning a value, or called by another kernel) are inlined: skipped
    # without a word; a kernel without types that nothing calls is named
    assert "twice" not in err and "put" not in err
    assert "skipping helper untyped: no signature" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["add.ir", "caller.ir"]


def test_untyped_parameters_take_their_types_from_check_inputs(tmp_path, capsys):
    path = write(tmp_path, "generic.py", '''
import torch
import tlxc
import tlxc.language as tl


@tlxc.kernel
def scale(x_ptr, n: tl.int32, BLOCK: tl.constexpr = 64):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def check_inputs():
    return (1,), (torch.ones(40, dtype=torch.float16), 40)
''')
    assert run(capsys, "check", path) == (0, "", "")
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "-o", tmp_path / "out")
    assert code == 0 and err == ""
    assert "ptr<f16>" in (tmp_path / "out" / "scale.ir").read_text()


def test_an_int_argument_of_one_from_check_inputs_folds_in(tmp_path, capsys):
    """As at a launch, an integer argument equal to 1 is the constant 1 in the check and the compile: an
    in-kernel tensor descriptor whose last stride is an argument needs it (TLX's Blackwell GEMM tutorials)."""
    path = write(tmp_path, "unit_stride.py", '''
import torch
import tlxc
import tlxc.language as tl


@tlxc.kernel
def copy(x_ptr, y_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    dx = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[stride_m, stride_n], block_shape=[BM, BN])
    dy = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[stride_m, stride_n], block_shape=[BM, BN])
    dy.store([0, 0], dx.load([0, 0]))


def check_inputs():
    x = torch.randn(16, 32)
    return (1,), (x, torch.empty_like(x), 16, 32, 32, 1), {"BM": 16, "BN": 32}
''')
    assert run(capsys, "check", path)[0] == 0
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "-o", tmp_path / "out")
    assert code == 0 and err == ""


def test_kernel_selection(tmp_path, capsys):
    path = write(tmp_path, "two.py", ADD + ADD.replace("def add(", "def add2("))
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "--kernel", "add2", "-o", tmp_path / "o")
    assert code == 0, err
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["add2.ir"]


def test_check_prints_nothing_on_success(tmp_path, capsys):
    path = write(tmp_path, "add_check.py", ADD)
    assert run(capsys, "check", path) == (0, "", "")


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"tlxc {tlxc.__version__}"


# -- errors: exit code 2 for the command line, 1 for the kernel -------------------------------
def test_unknown_arch(tmp_path, capsys):
    path = write(tmp_path, "add_arch.py", ADD)
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_91")
    assert code == 2
    assert err.strip().startswith("tlxc: no tlxc target for 'sm_91': no GPU of compute capability 9.1 is a "
                                  "tlxc target (targets: sm_90a, sm_100a, sm_80, sm_89, gfx942, gfx950; ")
    code, _out, err = run(capsys, "compile", path, "--arch", "nvidia")
    assert code == 2 and err.startswith("tlxc: unknown arch 'nvidia' (expected one of sm_90a, ")


def test_missing_constexpr(tmp_path, capsys):
    path = write(tmp_path, "no_default.py", ADD.replace("BLOCK: tl.constexpr = 128", "BLOCK: tl.constexpr"))
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "missing value for constexpr parameter 'BLOCK' of add (pass -D BLOCK=VALUE)" in err


def test_file_without_kernel(tmp_path, capsys):
    path = write(tmp_path, "empty.py", "x = 1\n")
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert (code, err.strip()) == (2, f"tlxc: {path} defines no @tlxc.kernel function")


def test_missing_file(tmp_path, capsys):
    code, _out, err = run(capsys, "compile", tmp_path / "nope.py", "--arch", "sm_90a")
    assert code == 2 and "no such file" in err


def test_unknown_stage(tmp_path, capsys):
    path = write(tmp_path, "add_stage.py", ADD)
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "--emit", "ir,llvm")
    assert code == 2 and "unknown stage 'llvm'" in err


def test_stage_the_target_does_not_produce(tmp_path, capsys, monkeypatch):
    # A backend that produces only the IR: asking for more is a command-line error, not a crash.
    import tlxc.compiler

    real = tlxc.compiler.compile_kernel

    def ir_only(kfn, spec, **options):
        return real(kfn, spec, **{**options, "stages": ("ir",)})

    monkeypatch.setattr(tlxc.compiler, "compile_kernel", ir_only)
    path = write(tmp_path, "add_cuda.py", ADD)
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "--emit", "ir,cuda", "-o", tmp_path / "o")
    assert (code, err.strip()) == (2, "tlxc: stage 'cuda' is not available yet for sm_90a")


def test_unknown_kernel_and_unknown_define(tmp_path, capsys):
    path = write(tmp_path, "add_names.py", ADD)
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a", "--kernel", "mul")
    assert code == 2 and "has no kernel named 'mul' (kernels: add)" in err
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a", "-D", "BLOK=64")
    assert code == 2 and "-D names BLOK" in err


def test_explicit_kernel_without_types(tmp_path, capsys):
    path = write(tmp_path, "untyped.py", '''
        import tlxc
        import tlxc.language as tl


        @tlxc.kernel
        def k(x_ptr, BLOCK: tl.constexpr = 16):
            tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)
    ''')
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a", "--kernel", "k")
    assert code == 2 and "no type for parameter(s) x_ptr" in err
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 2 and "skipping helper k: no signature" in err and "no kernel to compile" in err


def test_compile_error_exit_1(tmp_path, capsys):
    path = write(tmp_path, "bad.py", ADD.replace("mask=offs < n) + 1.0", "mask=offs < n) + scale"))
    code, _out, err = run(capsys, "compile", path, "--arch", "sm_90a", "-o", tmp_path / "o")
    assert code == 1
    source_line = path.read_text().splitlines()[9]
    col = source_line.index("scale")
    lines = err.splitlines()
    assert lines[0].startswith(f"{path}:10:{col}: error: ")
    assert "undefined name 'scale'" in lines[0]
    assert lines[1] == source_line
    assert lines[2] == " " * col + "^~~~~"
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    assert run(capsys, "check", path)[:2] == (1, "")


def test_syntax_error_in_file(tmp_path, capsys):
    path = write(tmp_path, "syntax.py", "import tlxc\n\ndef f(:\n    pass\n")
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 1
    assert err.startswith(f"{path}:3:")
    assert ": error: " in err.splitlines()[0]


def test_import_failure_is_one_line(tmp_path, capsys):
    path = write(tmp_path, "broken.py", "import tlxc\nraise RuntimeError('boom')\n")
    code, _, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 2
    assert err.strip() == f"tlxc: importing {path} failed at line 2: RuntimeError: boom"


def test_argparse_usage_error_returns_2(capsys):
    assert main(["compile"]) == 2
    capsys.readouterr()


# -- -D values ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [
    ("128", 128), ("-3", -3), ("0.5", 0.5), ("True", True), ("False", False), ("'fast'", "fast"),
    ("None", None), ("bf16", tl.bfloat16), ("fp32", tl.float32), ("tl.float16", tl.float16),
    ("float8e4nv", tl.float8e4nv), ("torch.bfloat16", tl.bfloat16), ("i64", tl.int64),
])
def test_define_values(text, value):
    assert parse_define_value(text) == value


def test_define_value_rejects_bare_words():
    with pytest.raises(UsageError, match="expected a Python literal"):
        parse_define_value("fast", "MODE")
