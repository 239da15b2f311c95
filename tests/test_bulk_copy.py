"""Bulk copies (non-tensor cp.async.bulk): ``tlx.async_load(ptr, buf, bulk=True, barrier=bar
[, bulk_size=n])`` and ``tlx.async_store(ptr, buf, n)``.  The interpreter lands a load's bytes on
its barrier as a TMA box's, keeps a store's read in flight until ``async_descriptor_store_wait``;
the checker counts the bytes against ``barrier_expect_bytes``; the CUDA path issues one copy from
one thread."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR
from tlxc.compiler import check_function
from tlxc.errors import CompilationError, InterpreterError, RaceError
from tlxc.frontend.specialize import parse_signature, specialization_from_args, specialization_from_types
from tlxc.language import tlx

BLOCK = 64          # f32 elements per program: 256 bytes


@tlxc.kernel
def bulk_scale(src, dst, BLOCK: tl.constexpr):
    """Each program: bulk-load its tile, compute 2x + 1 in registers, bulk-store it back."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    pid = tl.program_id(0)
    buf = bufs[1]
    bar = bars[1]
    tlx.barrier_expect_bytes(bar, BLOCK * 4)
    tlx.async_load(src + pid * BLOCK, buf, bulk=True, barrier=bar)
    tlx.barrier_wait(bar, 0)
    x = tlx.local_load(buf)
    tlx.local_store(buf, x * 2.0 + 1.0)
    tlx.async_store(dst + pid * BLOCK, buf, BLOCK * 4)
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def bulk_partial(src, dst, BLOCK: tl.constexpr, NBYTES: tl.constexpr, EXPECT: tl.constexpr):
    """Only the first NBYTES of the tile travel, both ways."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    buf = bufs[0]
    bar = bars[0]
    tlx.barrier_expect_bytes(bar, EXPECT)
    tlx.async_load(src, buf, bulk=True, bulk_size=NBYTES, barrier=bar)
    tlx.barrier_wait(bar, 0)
    tlx.async_store(dst, buf, NBYTES)
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def bulk_read_before_wait(src, dst, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], BLOCK * 4)
    tlx.async_load(src, bufs[0], bulk=True, barrier=bars[0])
    x = tlx.local_load(bufs[0])                      # the early read
    tlx.barrier_wait(bars[0], 0)
    tl.store(dst + tl.arange(0, BLOCK), x)


@tlxc.kernel
def bulk_overwrite_in_flight(src, dst, BLOCK: tl.constexpr, WAIT: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(bufs[0], tl.load(src + tl.arange(0, BLOCK)))
    tlx.async_store(dst, bufs[0], BLOCK * 4)
    if WAIT:
        tlx.async_descriptor_store_wait(0)
    tlx.local_store(bufs[0], tl.zeros((BLOCK,), tl.float32))     # the overwrite
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def bulk_no_store_wait(src, dst, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(bufs[0], tl.load(src + tl.arange(0, BLOCK)))
    tlx.async_store(dst, bufs[0], BLOCK * 4)


@tlxc.kernel
def bulk_hinted(src, dst, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], BLOCK * 4)
    tlx.async_load(src, bufs[0], bulk=True, barrier=bars[0], eviction_policy="evict_first")
    tlx.barrier_wait(bars[0], 0)
    tlx.async_store(dst, bufs[0], BLOCK * 4)
    tlx.async_descriptor_store_wait(0)


def _poisoned(n: int) -> torch.Tensor:
    return torch.full((n,), float("nan"))


# -- interpreter ---------------------------------------------------------------------------------
@pytest.mark.parametrize("programs", [1, 3])
def test_interpreter_bulk_round_trip(programs):
    src = torch.randn(programs * BLOCK)
    dst = _poisoned(programs * BLOCK)
    tlxc.interpret(bulk_scale)[(programs,)](src, dst, BLOCK=BLOCK)
    torch.testing.assert_close(dst.double(), src.double() * 2 + 1, rtol=1e-6, atol=1e-6)


def test_interpreter_bulk_size_moves_only_that_many_bytes():
    src = torch.randn(BLOCK)
    dst = _poisoned(BLOCK)
    tlxc.interpret(bulk_partial)[(1,)](src, dst, BLOCK=BLOCK, NBYTES=160, EXPECT=160)   # 40 of 64 floats
    assert torch.equal(dst[:40], src[:40])
    assert dst[40:].isnan().all()


@pytest.mark.parametrize("seed", range(3))
def test_interpreter_names_a_read_before_the_bulk_wait(monkeypatch, seed):
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "off")
    src = torch.randn(BLOCK)
    with pytest.raises(RaceError) as info:
        tlxc.interpret(bulk_read_before_wait, seed=seed)[(1,)](src, _poisoned(BLOCK), BLOCK=BLOCK)
    assert "bulk load" in info.value.render()


def test_interpreter_names_an_overwrite_during_the_bulk_store(monkeypatch):
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "off")
    src = torch.randn(BLOCK)
    dst = _poisoned(BLOCK)
    tlxc.interpret(bulk_overwrite_in_flight)[(1,)](src, dst, BLOCK=BLOCK, WAIT=True)
    assert torch.equal(dst, src)
    with pytest.raises(RaceError) as info:
        tlxc.interpret(bulk_overwrite_in_flight)[(1,)](src, _poisoned(BLOCK), BLOCK=BLOCK, WAIT=False)
    assert "bulk store" in info.value.render()


def test_interpreter_rejects_a_misaligned_bulk_source(monkeypatch):
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "off")
    src = torch.randn(BLOCK + 1)
    with pytest.raises(InterpreterError, match="misaligned bulk load.*multiple of 16 bytes"):
        tlxc.interpret(bulk_partial)[(1,)](src[1:], _poisoned(BLOCK), BLOCK=BLOCK, NBYTES=64, EXPECT=64)


def test_interpreter_rejects_a_bulk_load_past_the_tensor(monkeypatch):
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "off")
    src = torch.randn(BLOCK // 2)           # 128 bytes; the copy reads 256
    with pytest.raises(InterpreterError, match="out-of-bounds bulk load"):
        tlxc.interpret(bulk_partial)[(1,)](src, _poisoned(BLOCK), BLOCK=BLOCK, NBYTES=256, EXPECT=256)


# -- static checks ---------------------------------------------------------------------------------
def _findings(kernel, **constexprs):
    spec = specialization_from_types(kernel, parse_signature("src=*fp32,dst=*fp32"), constexprs)
    return check_function(kernel, spec, arch="sm_90a", num_warps=4)


def test_check_accepts_the_bulk_kernels():
    assert [f.message for f in _findings(bulk_scale, BLOCK=BLOCK) if f.severity == ERROR] == []
    assert [f.message for f in _findings(bulk_partial, BLOCK=BLOCK, NBYTES=160, EXPECT=160)
            if f.severity == ERROR] == []


@pytest.mark.parametrize("expect", [128, 256])
def test_check_counts_bulk_bytes_against_expect_bytes(expect):
    found = [f for f in _findings(bulk_partial, BLOCK=BLOCK, NBYTES=192, EXPECT=expect) if f.severity == ERROR]
    assert [f.check for f in found] == ["barrier.expect-bytes"], [f.message for f in found]
    assert "192" in found[0].message and str(expect) in found[0].message


def test_check_catches_an_overwrite_during_the_bulk_store():
    """The static twin of the interpreter's diagnosis: the store reads the buffer until a store wait."""
    assert [f.check for f in _findings(bulk_overwrite_in_flight, BLOCK=BLOCK, WAIT=True) if f.severity == ERROR] == []
    found = [f for f in _findings(bulk_overwrite_in_flight, BLOCK=BLOCK, WAIT=False) if f.severity == ERROR]
    assert [f.check for f in found] == ["race.tma-store"], [f.render() for f in found]
    assert "while the bulk store of task 'main'" in found[0].message
    assert "tl.zeros((BLOCK,), tl.float32))     # the overwrite" in found[0].render()


def test_check_notes_the_store_wait_tlxc_adds_before_exit():
    from tlxc.check.findings import INFO
    found = [(f.check, f.severity) for f in _findings(bulk_no_store_wait, BLOCK=BLOCK)]
    assert ("tma.store-in-flight-at-exit", INFO) in found


def test_kernel_with_a_bulk_store_waits_for_it_before_exit():
    src = bulk_no_store_wait.compile("src=*fp32,dst=*fp32", constexprs={"BLOCK": BLOCK}, arch="sm_90a",
                                     stages=("ir", "cuda")).asm["cuda"]
    body = src[src.index("tlx_bulk_commit_group(); }"):]
    assert "tlx_bulk_wait_group_read<0>();" in body            # after the last store, at the kernel's end


# -- frontend errors ---------------------------------------------------------------------------------
def _compile_error(body_kernel, **constexprs) -> str:
    from tlxc.compiler import frontend
    spec = specialization_from_types(body_kernel, parse_signature("src=*fp32,dst=*fp32"), constexprs)
    with pytest.raises(CompilationError) as info:
        frontend(body_kernel, spec)
    return str(info.value)


@tlxc.kernel
def _bad_bulk(src, dst, CASE: tl.constexpr):
    bufs = tlx.local_alloc((64,), tl.float32, 1)
    grid = tlx.local_alloc((8, 8), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    if CASE == 0:
        tlx.async_load(src, bufs[0], bulk=True)
    elif CASE == 1:
        tlx.async_load(src, bufs[0], bulk=True, barrier=bars[0], bulk_size=100)
    elif CASE == 2:
        tlx.async_load(src, bufs[0], bulk=True, barrier=bars[0], bulk_size=512)
    elif CASE == 3:
        tlx.async_load(src, grid[0], bulk=True, barrier=bars[0])
    elif CASE == 4:
        tlx.async_load(src + tl.arange(0, 64), bufs[0], bulk=True, barrier=bars[0])
    elif CASE == 5:
        tlx.async_load(src, bufs[0], bulk=True, barrier=bars[0], mask=True)
    elif CASE == 6:
        tlx.async_load(src + tl.arange(0, 64), bufs[0], barrier=bars[0])
    elif CASE == 7:
        tlx.async_store(dst, bufs[0], 48 * 8)


@pytest.mark.parametrize(("case", "message"), [
    (0, "completes on an mbarrier: pass barrier="),
    (1, "multiple of 16 bytes (cp.async.bulk), got 100"),
    (2, "'bulk_size' is 512 bytes but the buffer holds 256"),
    (3, "'result' must be a 1-D buffer"),
    (4, "'src' of a bulk copy must be one pointer"),
    (5, "takes no 'mask'"),
    (6, "'barrier' belongs to a bulk copy (bulk=True)"),
    (7, "'size' is 384 bytes but the buffer holds 256"),
])
def test_bulk_argument_errors_name_the_argument(case, message):
    text = _compile_error(_bad_bulk, CASE=case)
    assert message in text, text
    assert "test_bulk_copy.py" in text


# -- CUDA ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_bulk_copies_lower_to_one_issuing_thread(arch):
    from tlxc.compiler import compile_kernel
    x = torch.randn(BLOCK)
    spec = specialization_from_args(bulk_scale, {"src": x, "dst": x, "BLOCK": BLOCK})
    compiled = compile_kernel(bulk_scale, spec, arch=arch, num_warps=4)
    cuda = compiled.asm["cuda"]
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in cuda
    assert "cp.async.bulk.global.shared::cta.bulk_group" in cuda
    load = next(line for line in cuda.splitlines() if "tlx_bulk_load(" in line and "void" not in line)
    store = next(line for line in cuda.splitlines() if "tlx_bulk_store(" in line and "void" not in line)
    assert load.strip().startswith("if (tid == 0)") and "tlx_bulk_commit_group();" in store, (load, store)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_bulk_load_eviction_policy_uses_the_hinted_copy():
    from tlxc.compiler import compile_kernel
    x = torch.randn(BLOCK)
    spec = specialization_from_args(bulk_hinted, {"src": x, "dst": x, "BLOCK": BLOCK})
    compiled = compile_kernel(bulk_hinted, spec, arch="sm_90a", num_warps=4)
    assert "tlx_bulk_load_hint<1>(" in compiled.asm["cuda"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


# -- GPU -----------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("programs", [1, 5])
def test_gpu_bulk_round_trip(programs):
    src = torch.randn(programs * BLOCK, device="cuda")
    dst = torch.full_like(src, float("nan"))
    bulk_scale[(programs,)](src, dst, BLOCK=BLOCK)
    torch.testing.assert_close(dst.double(), src.double() * 2 + 1, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_bulk_size_moves_only_that_many_bytes():
    src = torch.randn(BLOCK, device="cuda")
    dst = torch.full_like(src, float("nan"))
    bulk_partial[(1,)](src, dst, BLOCK=BLOCK, NBYTES=160, EXPECT=160)
    assert torch.equal(dst[:40], src[:40]) and dst[40:].isnan().all()


@tlxc.kernel
def bulk_runtime_size(src, dst, nbytes, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 128)
    tlx.async_load(src, bufs[0], bulk=True, bulk_size=nbytes, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_store(dst, bufs[0], nbytes)
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def bulk_odd_slots(src, i, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)          # 20-byte buffers: slot 1 is misaligned
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 16)
    tlx.async_load(src, bufs[i], bulk=True, bulk_size=16, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)


def test_runtime_bulk_size_runs_and_is_left_to_the_interpreter():
    src = torch.randn(BLOCK)
    dst = _poisoned(BLOCK)
    tlxc.interpret(bulk_runtime_size)[(1,)](src, dst, 128, BLOCK=BLOCK)
    assert torch.equal(dst[:32], src[:32]) and dst[32:].isnan().all()
    spec = specialization_from_types(bulk_runtime_size, parse_signature("src=*fp32,dst=*fp32,nbytes=i32"),
                                     {"BLOCK": BLOCK})
    notes = [f.message for f in check_function(bulk_runtime_size, spec)]
    assert any("bulk_size) of tlx.async_load(bulk=True) depends on runtime values" in n for n in notes), notes


def test_a_possibly_misaligned_buffer_view_is_a_compile_error():
    from tlxc.compiler import compile_kernel
    spec = specialization_from_types(bulk_odd_slots, parse_signature("src=*fp32,i=i32"), {"BLOCK": 5})
    with pytest.raises(CompilationError, match="only known to start on a 4-byte boundary"):
        compile_kernel(bulk_odd_slots, spec, arch="sm_90a", num_warps=4)
