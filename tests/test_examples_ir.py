"""The examples' IR: every kernel round-trips through the text form, and the
IR shown in the docs is the IR the compiler produces today.

``docs/ir_matmul.txt`` is what ``tlxc compile examples/matmul.py --arch sm_90a
--emit ir`` prints; after a deliberate IR change, regenerate it with
``TLXC_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_examples_ir.py`` and
review the diff.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tlxc.cli import main, select_jobs, specialize_jobs
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
UPDATE = os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1"
WGMMA_EXAMPLES = {"hopper_gemm_ws", "hopper_gemm_ws_pingpong", "hopper_gemm_fp8", "flash_attention_fwd"}


def load_example(path: Path):
    if str(path.parent) not in sys.path:     # examples import their siblings (hopper_gemm_ws)
        sys.path.insert(0, str(path.parent))
    name = f"tlxc_example_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_example_ir_round_trips(example, arch):
    # the kernels `tlxc compile` compiles: helpers that return a value are inlined, and
    # unannotated parameters take the types of the file's check_inputs() arguments
    module_ = load_example(example)
    jobs = select_jobs(module_, example, None)
    specialize_jobs(jobs, {}, {}, {}, module_)
    jobs = [job for job in jobs if job.spec is not None]
    assert jobs, f"{example.name} defines no kernel"
    for job in jobs:
        if example.stem.startswith("blackwell") and arch != "sm_100a":      # tensor memory: sm_100a only
            with pytest.raises(TlxcError, match=r"only available on Blackwell \(sm_100a\)"):
                compile_kernel(job.kfn, job.spec, arch=arch, stages=("ir",))
            continue
        if example.stem in WGMMA_EXAMPLES and arch == "sm_100a":            # Hopper's register accumulators
            with pytest.raises(TlxcError, match=r"on Blackwell \(sm_100a\) async_dot accumulates in tensor memory"):
                compile_kernel(job.kfn, job.spec, arch=arch, stages=("ir",))
            continue
        text = compile_kernel(job.kfn, job.spec, arch=arch, stages=("ir", "ir.opt")).asm["ir"]
        module = parse_module(text, filename=example.name)
        assert print_module(module) == text
        # and the parsed module prints the same after a second trip
        assert print_module(parse_module(print_module(module))) == text


def test_example_host_wrappers_exist():
    wrappers = {"vector_add": "add", "softmax": "softmax", "rmsnorm": "rmsnorm", "layernorm": "layernorm",
                "matmul": "matmul"}
    for stem, wrapper in wrappers.items():
        module = load_example(ROOT / "examples" / f"{stem}.py")
        assert callable(getattr(module, wrapper)), f"examples/{stem}.py has no host wrapper {wrapper}()"
        assert callable(module.main)


def current_cli_ir(tmp_path: Path, capsys, example: str) -> str:
    code = main(["compile", str(ROOT / "examples" / example), "--arch", "sm_90a", "--emit", "ir",
                 "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    (path,) = tmp_path.glob("*.ir")
    return path.read_text()


def test_docs_matmul_ir_is_current(tmp_path, capsys):
    snapshot = ROOT / "docs" / "ir_matmul.txt"
    current = current_cli_ir(tmp_path, capsys, "matmul.py")
    if UPDATE:
        snapshot.write_text(current)
    assert snapshot.exists(), "docs/ir_matmul.txt is missing: run with TLXC_UPDATE_SNAPSHOTS=1"
    assert snapshot.read_text() == current, (
        "docs/ir_matmul.txt is stale: the matmul example's IR changed; regenerate with "
        "TLXC_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_examples_ir.py and review the diff")


def test_readme_quickstart_is_current(tmp_path, capsys):
    """The README shows the vector-add kernel and its IR; both must be today's."""
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "vector_add.py").read_text()
    kernel_source = source[source.index("@tlxc.kernel"):source.index("\n\n\ndef add(")]
    assert kernel_source in readme, "README's vector-add kernel differs from examples/vector_add.py"
    current = current_cli_ir(tmp_path, capsys, "vector_add.py")
    block = _fenced_block_after(readme, "tlxc compile examples/vector_add.py --arch sm_90a --emit ir\n```")
    if UPDATE and block != current:
        readme = readme.replace(block, current)
        (ROOT / "README.md").write_text(readme)
        block = current
    assert block == current, ("README's vector-add IR is stale; regenerate with TLXC_UPDATE_SNAPSHOTS=1 "
                              "python -m pytest tests/test_examples_ir.py and review the diff")


def _fenced_block_after(text: str, marker: str) -> str:
    start = text.index(marker) + len(marker)
    start = text.index("```text\n", start) + len("```text\n")
    return text[start:text.index("```", start)]
