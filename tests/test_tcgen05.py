"""Blackwell's tensor memory and tcgen05 MMA on the interpreter and in the
static checker (tests/kernels_tcgen05.py): results against a float32
reference, the TLX idioms (MMA completion freeing the input stage, TMEM
double buffering with per-subtile release) clean, their broken variants
caught at their lines, and the front end's rules.  No Blackwell GPU exists
here; the generated code is covered by tests/test_tcgen05_codegen.py
(compiled by ptxas for sm_100a)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import kernels_tcgen05 as K

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR
from tlxc.compiler import check_function
from tlxc.errors import DeadlockError, RaceError, TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret
from tlxc.language import tlx

CORPUS = Path(K.__file__)


def _line(marker: str) -> int:
    found = [n for n, line in enumerate(CORPUS.read_text().splitlines(), 1) if marker in line]
    assert len(found) == 1, (marker, found)
    return found[0]


def _gemm_args(M, N, K_, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K_, generator=g).to(torch.bfloat16)
    b = torch.randn(K_, N, generator=g).to(torch.bfloat16)
    c = torch.full((M, N), float("nan"))                      # poisoned: every element must be written
    descs = (tlxc.TensorDescriptor.from_tensor(a, [128, 32], swizzle=64),
             tlxc.TensorDescriptor.from_tensor(b, [32, 64], swizzle=128))
    return a, b, c, descs


def _rel_error(c, a, b) -> float:
    ref = a.double() @ b.double()
    return ((c.double() - ref).abs().max() / ref.abs().max()).item()


# -- the interpreter -------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [(2, 2, 2), (3, 1, 1), (2, 2, 4)], ids=lambda c: "stages{}-tmem{}-sub{}".format(*c))
@pytest.mark.parametrize("seed", [None, 3])
def test_tmem_gemm_matches_float32(config, seed):
    stages, ntmem, sub = config
    M, N, K_ = 300, 136, 200                    # not multiples of the 128 x 64 x 32 tiles
    a, b, c, descs = _gemm_args(M, N, K_)
    interpret(K.tmem_gemm, (2,), (*descs, c, M, N, K_),
              {"NUM_STAGES": stages, "NUM_TMEM": ntmem, "EPILOGUE_SUBTILE": sub}, seed=seed, arch="sm_100a")
    assert _rel_error(c, a, b) < 1e-5          # bf16 inputs are exact; float32 accumulation


def test_sync_release_is_correct():
    """A synchronous MMA has completed when async_dot returns: arriving after it is safe."""
    M, N, K_ = 130, 64, 96
    a, b, c, descs = _gemm_args(M, N, K_)
    interpret(K.tmem_gemm, (1,), (*descs, c, M, N, K_), {"BUG": "sync_release"}, seed=1, arch="sm_100a")
    assert _rel_error(c, a, b) < 1e-5


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "tf32"])
def test_sync_mma(dtype, trans_b):
    K_, N = 64, 32
    a = torch.randn(128, K_).to(dtype)
    b = torch.randn(K_, N).to(dtype)
    c = torch.full((128, N), float("nan"))
    interpret(K.sync_mma, (1,), (a, b.t().contiguous() if trans_b else b, c), {"K": K_, "N": N, "TRANS_B": trans_b},
              arch="sm_100a")
    # bf16 inputs are exact in float32; tf32 keeps 10 mantissa bits (relative 2^-11 per input)
    assert _rel_error(c, a, b) < (1e-5 if dtype == torch.bfloat16 else 3e-3)


def test_tmem_roundtrip_and_column_slice():
    x = torch.randn(128, 64)
    out = torch.full((128, 32), float("nan"))
    interpret(K.tmem_roundtrip, (1,), (x, out), arch="sm_100a")
    assert torch.equal(out, x[:, 32:])


@pytest.mark.parametrize("bug, error, text", [
    ("async_manual_release", RaceError, "may overwrite the slot while the asynchronous tcgen05 MMA operand read"),
    ("no_mbarrier", DeadlockError, "deadlock"),
    # the epilogue's early read sees never-written tensor memory as NaN (garbage on the GPU, not an
    # error: TLX's attention kernels read it on purpose and discard it); its extra release then
    # leaves the MMA task waiting forever
    ("no_tmem_wait", DeadlockError, "deadlock"),
    ("arrive_not_commit", RaceError, "is not ordered after the asynchronous tcgen05 MMA accumulator write"),
])
@pytest.mark.usefixtures("interpreter_diagnosis")
def test_interpreter_diagnoses_broken_variants(bug, error, text):
    M, N, K_ = 300, 136, 200
    _, _, c, descs = _gemm_args(M, N, K_)
    with pytest.raises(error) as info:
        for seed in (None, 1, 2, 3, 4):
            interpret(K.tmem_gemm, (2,), (*descs, c, M, N, K_), {"BUG": bug}, seed=seed, arch="sm_100a")
    assert text in info.value.render()


def test_interpreter_needs_the_blackwell_arch():
    _, _, c, descs = _gemm_args(130, 64, 64)
    with pytest.raises(TlxcError, match="only available on Blackwell .sm_100a.; compiling for sm_90a .the interpreter "
                                        "emulates sm_90a unless TLXC_INTERPRET_ARCH=sm_100a"):
        interpret(K.tmem_gemm, (1,), (*descs, c, 130, 64, 64))


# -- the static checker ----------------------------------------------------------------------------------
def _findings(**constexprs):
    spec = specialization_from_types(K.tmem_gemm, {}, constexprs)
    return [f for f in check_function(K.tmem_gemm, spec, arch="sm_100a") if f.severity == ERROR]


@pytest.mark.parametrize("config", [(2, 2, 2), (3, 1, 1), (4, 2, 4), (2, 3, 1)])
@pytest.mark.parametrize("bug", ["", "sync_release"])
def test_blackwell_idioms_are_clean(config, bug):
    """MMA completion arriving on the input's empty barrier; TMEM double buffering with
    the epilogue releasing tmem_empty once per subtile (arrive_count = EPILOGUE_SUBTILE)."""
    stages, ntmem, sub = config
    assert _findings(NUM_STAGES=stages, NUM_TMEM=ntmem, EPILOGUE_SUBTILE=sub, BUG=bug) == []


BROKEN = [
    ("async_manual_release", "race.mma-early-release",
     "race: slot released before the MMA that reads it completed", "# the producer's B load"),
    ("no_mbarrier", "barrier.no-arrival", "no task ever arrives on 'empty'", "# the producer's wait"),
    ("no_tmem_empty_wait", "race.tcgen05", "accumulates into 'acc'[0]", "# the MMA issue"),
    ("commit_twice", "barrier.extra-arrive", "arrives on 'tmem_full' twice", "# the MMA's commit"),
    ("arrive_not_commit", "race.mma-early-release",
     "releases tmem_full[buf] (buf = t % 2 = 0) with tlx.barrier_arrive", "# the epilogue's read"),
    ("no_tmem_wait", "barrier.deadlock", "deadlock", "# the MMA's TMEM wait"),
    ("tmem_oversubscribed", "resource.tensor-memory",
     "the kernel's tensor-memory buffers need 640 columns, more than the 512 columns", "def tmem_gemm"),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c[0])
def test_broken_variants_are_caught_at_their_line(case):
    bug, check, text, marker = case
    found = _findings(BUG=bug)
    assert found, bug
    first = found[0]
    line = _line(marker)
    if bug == "async_manual_release":            # the producer's refill, with a note at the early arrive
        line = _line("tlx.async_descriptor_load(a_desc")
    if check == "race.mma-early-release":
        assert _line(f"# BUG {bug}") in [loc.line for _, loc in first.notes if loc]
    assert (first.check, first.loc.line) == (check, line), first.render()
    assert text in first.message, first.render()


# -- the front end --------------------------------------------------------------------------------------
def _compile(kernel, arch="sm_100a", **constexprs):
    kernel.compile(constexprs=constexprs, arch=arch, stages=("ir",))


def test_tmem_needs_sm_100a():
    @tlxc.kernel
    def k(out_ptr: tl.pointer_type(tl.float32)):
        tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)

    with pytest.raises(TlxcError, match=r"tensor memory \(storage=tlx.storage_kind.tmem\) is only available on "
                                        r"Blackwell \(sm_100a\); compiling for sm_90a"):
        _compile(k, arch="sm_90a")
    _compile(k)


@pytest.mark.parametrize("shape, dtype, text", [
    ((32, 64), tl.float32, "tensor-memory buffers have 128 rows .one per lane. or 64"),
    ((128, 63), tl.bfloat16, "packed 2 to a 32-bit tensor-memory column"),
    ((128, 1024), tl.float32, "at most 512 32-bit columns"),
    ((128, 2048), tl.float16, "got 2048 f16 elements = 1024 columns"),
])
def test_tmem_buffer_rules(shape, dtype, text):
    @tlxc.kernel
    def k(out_ptr: tl.pointer_type(tl.float32), R: tl.constexpr, C: tl.constexpr, D: tl.constexpr):
        tlx.local_alloc((R, C), D, 1, storage=tlx.storage_kind.tmem)

    with pytest.raises(TlxcError, match=text):
        _compile(k, R=shape[0], C=shape[1], D=dtype)


def _mma_kernel():
    @tlxc.kernel
    def k(x_ptr, MODE: tl.constexpr, N: tl.constexpr = 64):
        a = tlx.local_alloc((128, 32), tl.bfloat16, 1)
        b = tlx.local_alloc((32, N), tl.bfloat16, 1)
        acc = tlx.local_alloc((128, N), tl.float32, 1, storage=tlx.storage_kind.tmem)
        bar = tlx.alloc_barriers(1, arrive_count=1)
        if MODE == "register_a":
            tlx.async_dot(tl.zeros((128, 32), tl.bfloat16), b[0], acc[0], mBarriers=[bar[0]])
        elif MODE == "register_acc":
            tlx.async_dot(a[0], b[0], tl.zeros((128, N), tl.float32))
        elif MODE == "two_ctas":
            tlx.async_dot(a[0], b[0], acc[0], two_ctas=True, mBarriers=[bar[0]])
        else:
            tlx.async_dot(a[0], b[0], acc[0], mBarriers=[bar[0]])
    return k


@pytest.mark.parametrize("mode, arch, text", [
    ("register_a", "sm_100a", "register operand is not supported on Blackwell: 'A' must be a shared buffer"),
    ("register_acc", "sm_100a", "on Blackwell (sm_100a) async_dot accumulates in tensor memory"),
    ("two_ctas", "sm_100a", "with two_ctas=True runs on a CTA pair (cta_group::2): launch clusters of an even "
                            "number of CTAs"),
    ("ok", "sm_90a", "tensor memory (storage=tlx.storage_kind.tmem) is only available on Blackwell"),
])
def test_async_dot_rules_on_blackwell(mode, arch, text):
    with pytest.raises(TlxcError) as info:
        _mma_kernel().compile("x_ptr=*fp32", constexprs={"MODE": mode}, arch=arch, stages=("ir",))
    assert text in info.value.message


def test_tcgen05_shape_rules():
    with pytest.raises(TlxcError, match="N must be a multiple of 16 between 16 and 256 for M = 128, got N=8"):
        _mma_kernel().compile("x_ptr=*fp32", constexprs={"MODE": "ok", "N": 8}, arch="sm_100a",
                              stages=("ir",))
