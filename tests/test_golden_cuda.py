"""The generated CUDA of every example and of the test kernels the command line can
compile, pinned by digest: a refactor that should not change the generated code
(issue 20) proves it here.

Each kernel ``tlxc compile`` would compile from ``examples/*.py`` and
``tests/kernels_*.py`` (kernels with annotations or a ``check_inputs()``; the others
are skipped as the command line skips them) is compiled for sm_90a and sm_100a up to
the CUDA text (``stages=("cuda",)``: NVRTC is not run).  ``tests/snapshots/golden/cuda_sha256.json`` holds, per file, kernel and arch,
the sha256 of the CUDA text, or ``error: <sha256 of the message>`` when the compiler
refuses the kernel on that arch (a Hopper kernel on sm_100a, say).  After a
deliberate change of the generated code, regenerate with
``UPDATE_GOLDEN=1 python -m pytest tests/test_golden_cuda.py`` and review the diff.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
import torch

import tlxc
from tlxc.cli import UsageError, load_module, select_jobs, specialize_jobs
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_args

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "snapshots" / "golden" / "cuda_sha256.json"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
ARCHS = ("sm_90a", "sm_100a")
FILES = sorted([*(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")),
                *(ROOT / "tests").glob("kernels_*.py")])


def digests_of(path: Path) -> dict[str, str]:
    """What ``tlxc compile FILE`` would compile: kernels with annotations or check_inputs()."""
    module = load_module(str(path))
    try:
        jobs = select_jobs(module, str(path), None)
        specialize_jobs(jobs, {}, {}, {}, module)
    except UsageError as exc:
        return {"*": "usage error: " + _sha(str(exc).replace(str(ROOT), "<root>"))}
    out = {}
    for job in jobs:
        if job.spec is not None:
            out.update(_digests(job.stem, job.kfn, job.spec, job.num_warps, job.cluster))
    return out


def _digests(name, kfn, spec, num_warps=4, cluster=None) -> dict[str, str]:
    out = {}
    for arch in ARCHS:
        key = f"{name}@{arch}"
        try:        # the CUDA stage alone: the text, without NVRTC
            source = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps, stages=("cuda",),
                                    cluster=cluster).asm["cuda"]
        except TlxcError as exc:
            out[key] = "error: " + _sha(f"{type(exc).__name__}: {exc}".replace(str(ROOT), "<root>"))
        else:
            out[key] = _sha(source.replace(f"tlxc {tlxc.__version__} ", "tlxc <version> ", 1))
    return out


def _desc(shape, box, dtype=torch.float32):
    return tlxc.TensorDescriptor.from_tensor(torch.zeros(*shape, dtype=dtype), box)


def _cases():
    """Test kernels without annotations, specialized as their tests launch them: TMA, clusters and
    distributed shared memory, wgmma, TMA reductions, warp specialization, cp.async pipelines."""
    import kernels_cluster
    import kernels_dsm
    import kernels_tma
    import kernels_tma_reduce
    import kernels_wgmma
    import kernels_ws
    x, bf = torch.zeros(64, 64), torch.bfloat16
    cases = []
    for prefetch in (False, True):
        d = _desc((64, 128), [32, 64])
        cases.append((f"tma_add_one.prefetch{int(prefetch)}", kernels_tma.tma_add_one,
                      {"in_desc": d, "out_desc": d, "BM": 32, "BN": 64, "PREFETCH": prefetch}, 4, None))
    cases.append(("multicast_exchange", kernels_cluster.multicast_exchange,
                  {"in_desc": _desc((64, 32), [16, 32]), "out_ptr": torch.empty(1), "BM": 16, "BN": 32},
                  4, (2, 1, 1)))
    cases.append(("dsm_swap", kernels_dsm.dsm_swap, {"x_ptr": x, "y_ptr": x, "n": 8, "BLOCK": 64}, 4, (2, 1, 1)))
    cases.append(("dsm_row_sums", kernels_dsm.dsm_row_sums,
                  {"x_ptr": x, "out_ptr": x, "m": 8, "N": 64, "BLOCK_M": 64}, 1, (1, 2, 1)))
    cases.append(("dsm_bulk_forward", kernels_dsm.dsm_bulk_forward,
                  {"x_ptr": x, "y_ptr": x, "n": 8, "BLOCK": 128, "WAIT": True}, 1, (2, 1, 1)))
    for b_transposed in (0, 1):
        d = _desc((64, 64), [64, 64], bf)
        cases.append((f"wgmma_tile.bt{b_transposed}", kernels_wgmma.wgmma_tile,
                      {"a_desc": d, "b_desc": d, "c_ptr": torch.empty(64, 64), "BM": 64, "BN": 64, "BK": 64,
                       "B_TRANSPOSED": b_transposed}, 4, None))
    for warps in (4, 8):
        d = _desc((128, 256), [128, 64], bf)
        cases.append((f"wgmma_loop.w{warps}", kernels_wgmma.wgmma_loop,
                      {"a_desc": d, "b_desc": d, "c_ptr": torch.empty(128, 128), "K": 256, "BM": 128, "BN": 128,
                       "BK": 64}, warps, None))
    cases.append(("swizzled_round_trip", kernels_wgmma.swizzled_round_trip,
                  {"a_desc": _desc((64, 64), [64, 64], bf), "out_ptr": torch.empty(64, 64), "BM": 64, "BK": 64},
                  4, None))
    for kind, dtype in (("add", torch.float32), ("max", torch.float16)):
        cases.append((f"reduce_splits.{kind}", kernels_tma_reduce.reduce_splits,
                      {"x_desc": _desc((3, 64, 128), [1, 32, 16], dtype), "out_desc": _desc((64, 128), [32, 16], dtype),
                       "BM": 32, "BN": 16, "KIND": kind}, 4, None))
    cases.append(("rowsum_ws", kernels_ws.rowsum_ws,
                  {"x_ptr": x, "out_ptr": x, "n_rows": 64, "n_cols": 64, "BLOCK_R": 16, "BLOCK_C": 32,
                   "NUM_STAGES": 2, "BUG": 0}, 4, None))
    cases.append(("pingpong_kernel", kernels_ws.pingpong_kernel,
                  {"x_ptr": x, "sums_ptr": x, "tickets_ptr": torch.zeros(4, dtype=torch.int32),
                   "counter_ptr": torch.zeros(1, dtype=torch.int32), "n_tiles": 4, "BLOCK": 32, "ORDERED": True,
                   "WAIT_THREADS": 256, "ARRIVE_THREADS": 256}, 4, None))
    cases.append(("cp_async_pipeline", kernels_ws.cp_async_pipeline,
                  {"x_ptr": x, "out_ptr": x, "n_cols": 64, "BLOCK": 32, "NUM_STAGES": 4, "PENDING": 3}, 4, None))
    return cases


def test_test_kernels_match_golden():
    current = {}
    for name, kfn, args, num_warps, cluster in _cases():
        spec = specialization_from_args(kfn, args)
        current.update(_digests(name, kfn, spec, num_warps, cluster))
    _compare("tests/(specialized in test_golden_cuda.py)", current)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _golden() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_generated_cuda_matches_golden(path):
    _compare(f"{path.parent.name}/{path.name}", digests_of(path))


def _compare(key: str, current: dict[str, str]) -> None:
    if UPDATE:
        import fcntl
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        with open(Path(tempfile.gettempdir()) / "tlxc_golden_cuda.lock", "w") as lock:      # pytest -n 2: one writer at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            golden = _golden()
            golden[key] = current
            GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1, sort_keys=True) + "\n")
        return
    golden = _golden()
    if key not in golden:       # a kernel file added after the snapshot: UPDATE_GOLDEN=1 adds it
        pytest.skip(f"{key} has no golden digests yet: run with UPDATE_GOLDEN=1 and review")
    expected = golden[key]
    changed = sorted(k for k in expected.keys() | current.keys() if expected.get(k) != current.get(k))
    assert not changed, (f"{key}: generated CUDA changed for {', '.join(changed)}; if deliberate, "
                         f"regenerate with UPDATE_GOLDEN=1 python -m pytest tests/test_golden_cuda.py")


def test_golden_covers_kernels():
    """The snapshot is not vacuous: it pins CUDA text of many kernels on both archs."""
    golden = _golden()
    cuda = [k for entries in golden.values() for k, v in entries.items() if not v.startswith(("error", "usage"))]
    assert len(cuda) >= 50
    files = {f"{p.parent.name}/{p.name}" for p in FILES}
    stale = sorted(k for k in golden if not k.startswith("tests/(") and k not in files)
    assert not stale, f"golden digests of files that no longer exist: {stale} (UPDATE_GOLDEN=1 after removing them)"
    assert any(k.endswith("@sm_100a") for k in cuda) and any(k.endswith("@sm_90a") for k in cuda)
