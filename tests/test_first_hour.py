"""Issue 21, "First hour": target spellings, the one inputs hook, docs/tlx.md, the
version source, LICENSE/CHANGELOG, TLXC_NVTX wiring and the test command."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import tomllib

import tlxc
from tlxc import arch
from tlxc.cli import main

ROOT = Path(__file__).resolve().parent.parent

GENERIC = '''
import torch
import tlxc
import tlxc.language as tl


@tlxc.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def check_inputs():
    return (1,), (torch.ones(40, dtype=torch.float16), 40), {"BLOCK": 64, "num_warps": 2}
'''


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- target names ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("written", "target", "plain"), [
    ("sm_90a", "sm_90a", False), ("sm_90", "sm_90a", True), ("sm90", "sm_90a", True), ("cuda:90", "sm_90a", True),
    ("90", "sm_90a", True), ("sm_100", "sm_100a", True), ("cuda:100", "sm_100a", True), ("SM_100A", "sm_100a", False),
    ("sm_80", "sm_80", False), ("cuda:89", "sm_89", False), ("hip:gfx942", "gfx942", False)])
def test_plain_compute_capabilities_name_their_target(written, target, plain):
    resolved = arch.resolve(written)
    assert (resolved.arch, resolved.plain) == (target, plain)


@pytest.mark.parametrize(("written", "why"), [
    ("sm_120", "lacks the tcgen05 instructions and tensor memory"), ("cuda:121", "sm_121"),
    ("sm_103", "sm_100a cubins run on compute capability 10.0 only"), ("sm_86", "less shared memory"),
    ("sm_75", "older than tlxc's oldest target"), ("sm_80a", "sm_80 has no arch-specific variant"),
    ("volta", "unknown arch 'volta'")])
def test_targets_tlxc_lacks_are_refused_with_the_reason(written, why):
    with pytest.raises(arch.ArchError, match=re.escape(why)):
        arch.resolve(written)


def test_the_launch_path_maps_capabilities_through_the_same_table():
    assert [arch.arch_for_capability(*cc) for cc in ((8, 0), (8, 9), (9, 0), (10, 0))] == \
        ["sm_80", "sm_89", "sm_90a", "sm_100a"]
    with pytest.raises(arch.ArchError, match="compute capability 12.0"):
        arch.arch_for_capability(12, 0)


def test_one_table_of_targets():
    from tlxc import compiler
    from tlxc.codegen_nvptx import toolchain
    assert compiler.ARCHS is arch.ARCHS and set(toolchain.SUPPORTED_ARCHS) == set(arch.NVIDIA_ARCHS)


def test_compile_accepts_sm_100_and_notes_the_arch_specific_target(tmp_path, capsys):
    code, out, err = run(capsys, "compile", ROOT / "examples" / "blackwell_gemm_ws.py", "--arch", "sm_100",
                         "--emit", "ir.opt")
    assert code == 0, err
    assert "tcgen05" in out
    assert "--arch sm_100 compiles for sm_100a: the kernel uses tcgen05 and tensor memory" in err


def test_plain_name_without_arch_specific_use_says_nothing(tmp_path, capsys):
    code, _out, err = run(capsys, "compile", ROOT / "examples" / "vector_add.py", "--arch", "cuda:90")
    assert (code, err) == (0, "")


def test_compile_without_arch_and_without_a_gpu_says_what_to_pass(capsys, monkeypatch):
    monkeypatch.setattr(arch, "local_arch", lambda: None)
    monkeypatch.setattr("tlxc.cli.local_arch", lambda: None)
    code, _out, err = run(capsys, "compile", ROOT / "examples" / "vector_add.py")
    assert code == 2 and err.startswith("tlxc: --arch is needed: there is no local GPU")


def test_arch_defaults_to_the_local_gpu(capsys, monkeypatch):
    monkeypatch.setattr("tlxc.cli.local_arch", lambda: "sm_100a")
    code, out, err = run(capsys, "compile", ROOT / "examples" / "blackwell_gemm_ws.py", "--emit", "ir")
    assert code == 0, err            # tensor memory compiles: the local (sm_100a) rules applied
    assert "storage = \"tmem\"" in out or "tmem" in out


def test_interpreter_arch_takes_the_same_names(monkeypatch):
    from tlxc.interpreter.launch import interpret_arch
    assert interpret_arch("sm_100") == "sm_100a"
    with pytest.raises(tlxc.LaunchError, match="no tlxc target for 'sm_120'"):
        interpret_arch("sm_120")


# -- check_inputs: the one inputs hook ---------------------------------------------------------------
def test_check_and_compile_take_types_and_constexprs_from_check_inputs(tmp_path, capsys):
    path = write(tmp_path, "generic_block.py", GENERIC)
    assert run(capsys, "check", path) == (0, "", "")
    code, out, err = run(capsys, "compile", path, "--arch", "sm_90a")
    assert code == 0, err
    assert "%x_ptr: ptr<f16>" in out and 'symbol = "scale_BLOCK64"' in out
    code, out, _err = run(capsys, "compile", path, "--arch", "sm_90a", "-D", "BLOCK=32")   # -D wins
    assert code == 0 and 'symbol = "scale_BLOCK32"' in out


def test_check_inputs_may_take_the_kernel_name(tmp_path, capsys):
    path = write(tmp_path, "named.py", GENERIC.replace("def check_inputs():", "def check_inputs(kernel):\n"
                                                       "    assert kernel == 'scale', kernel"))
    assert run(capsys, "check", path, "--run") == (0, "", "")


def test_trace_reads_check_inputs(tmp_path, capsys):
    path = write(tmp_path, "traced.py", GENERIC)
    code, _out, err = run(capsys, "trace", path, "-o", tmp_path / "t.svg")
    assert code == 0, err
    assert "<svg" in (tmp_path / "t.svg").read_text()


def test_trace_inputs_is_read_as_the_former_name(tmp_path, capsys):
    path = write(tmp_path, "old_name.py", GENERIC.replace("def check_inputs", "def trace_inputs"))
    assert run(capsys, "check", path) == (0, "", "")


def test_a_kernel_without_types_or_inputs_is_still_explained(tmp_path, capsys):
    path = write(tmp_path, "bare.py", GENERIC.split("def check_inputs")[0])
    code, _out, err = run(capsys, "check", path, "--kernel", "scale")
    assert code == 2 and "or define check_inputs() in the file" in err


@pytest.mark.parametrize(("hook", "words"), [
    ("    return (torch.ones(40), 40), {'BLOCK': 64}\n", "passes arguments that do not fit scale"),   # no grid
    ("    raise RuntimeError('no data here')\n", "check_inputs() failed: RuntimeError: no data here"),
])
def test_a_check_inputs_that_gives_no_types_says_why(tmp_path, capsys, hook, words):
    """It used to be dropped silently: 'no kernel to compile (every kernel was skipped as a helper)'."""
    body = GENERIC.split("def check_inputs")[0] + "def check_inputs():\n" + hook
    path = write(tmp_path, "wrong_hook.py", body)
    for argv in (("check", path), ("compile", path, "--arch", "sm_90a"), ("check", path, "--kernel", "scale")):
        code, _out, err = run(capsys, *argv)
        assert code == 2 and words in err, (argv, err)


# -- docs, license, version ---------------------------------------------------------------------------
def test_docs_tlx_lists_every_supported_name():
    from tlxc.frontend.builtins import RULES
    from tlxc.language import tlx
    doc = (ROOT / "docs" / "tlx.md").read_text()
    names = set(tlx.TLX_BUILTINS) | {"async_tasks", "async_task", "storage_kind", "get_bufidx_phase",
                                     "tensor_descriptor_type", "nv_mma_shared_layout_encoding"}
    undocumented = sorted(n for n in names if not re.search(rf"tlx\.{n}\b", doc))
    assert not undocumented, f"docs/tlx.md does not describe tlx.{', tlx.'.join(undocumented)}"
    assert all("tlx." + n in RULES for n in tlx.TLX_BUILTINS)
    assert "## Not supported yet" in doc


def test_docs_point_to_docs_tlx_md_not_to_a_file_outside_the_repository():
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert "shared/reference/tlx_api.md" not in path.read_text(), path
    assert "docs/tlx.md" in (ROOT / "README.md").read_text()


def test_one_version_source_and_a_license_matching_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tlxc.__version__"}
    init = (ROOT / "tlxc" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"$', init, re.MULTILINE)      # a literal: read without importing
    assert project["project"]["license"]["text"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    assert f"## {tlxc.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = "python -m pytest -q -n auto"
    assert f"```\n{command}\n```" in readme and command in ci
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme


# -- TLXC_NVTX ----------------------------------------------------------------------------------------
def test_the_launch_path_wraps_every_plan_in_nvtx():
    """_prepare builds each plan's launcher; the plan must hold the nvtx-wrapped one (GPU test below
    checks the range itself)."""
    import inspect

    from tlxc.runtime import launch
    source = inspect.getsource(launch._prepare)
    assert "nvtx.wrap(run, compiled.metadata[\"name\"])" in source
    assert source.index("nvtx.wrap(") < source.index("return LaunchPlan(run")


@pytest.mark.gpu
def test_nvtx_range_per_launch_on_the_gpu(monkeypatch):
    import torch

    import tlxc.language as tl
    monkeypatch.setenv("TLXC_NVTX", "1")
    names = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: names.append(name))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)

    @tlxc.jit
    def nvtx_fill(out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < n)

    out = torch.full((300,), float("nan"), device="cuda")
    nvtx_fill[(3,)](out, 300, BLOCK=128)
    nvtx_fill[(3,)](out, 300, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(300, dtype=torch.float32))
    assert names == ["nvtx_fill_BLOCK128"] * 2
