"""TMA through tensor descriptors: the interpreter runs a load → compute →
store kernel on shapes that are not multiples of the box (zero-filled loads,
clipped stores), and the CUDA path compiles it for sm_90a and sm_100a.  The
GPU run is marked (the encode and the copies have not run on hardware yet)."""
from __future__ import annotations

from pathlib import Path

import kernels_tma as K
import pytest
import torch

import tlxc
from tlxc.errors import InterpreterError, RaceError
from tlxc.language import tlx

BM, BN = 32, 64


def _launch(x, out, interpret, prefetch=False):
    a = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    b = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    grid = ((x.shape[0] + BM - 1) // BM, (x.shape[1] + BN - 1) // BN)
    launcher = tlxc.interpret(K.tma_add_one) if interpret else K.tma_add_one
    launcher[grid](a, b, BM=BM, BN=BN, PREFETCH=prefetch, num_warps=4)


@pytest.mark.parametrize("prefetch", [False, True], ids=["", "l2-prefetch"])
@pytest.mark.parametrize("shape", [(32, 64), (100, 132), (7, 200)])
def test_interpreter_tma_round_trip(shape, prefetch):
    x = torch.randn(*shape)
    out = torch.full(shape, float("nan"))
    _launch(x, out, interpret=True, prefetch=prefetch)
    assert torch.equal(out, x + 1)


def test_prefetch_lowers_to_the_l2_tensor_prefetch():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    a = tlxc.TensorDescriptor.from_tensor(torch.randn(64, 128), [BM, BN])
    spec = specialization_from_args(K.tma_add_one, {"in_desc": a, "out_desc": a, "BM": BM, "BN": BN,
                                                    "PREFETCH": True})
    compiled = compile_kernel(K.tma_add_one, spec, arch="sm_90a", num_warps=4)
    cuda = compiled.asm["cuda"]
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in cuda
    lines = cuda.splitlines()
    calls = [i for i, line in enumerate(lines) if "tlx_tma_prefetch_2d(&" in line]
    # a [32, 64] f32 box (256-byte rows) is two 128-byte sub-boxes: two prefetches per op, one guard;
    # the second op is predicated
    assert len(calls) == 4 and "&&" not in lines[calls[0] - 1] and "&&" in lines[calls[2] - 1]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_prefetch_offsets_are_checked():
    from tlxc.frontend.specialize import specialization_from_args

    @tlxc.kernel
    def bad(in_desc):
        tlx.async_descriptor_prefetch_tensor(in_desc, [0])

    a = tlxc.TensorDescriptor.from_tensor(torch.randn(64, 128), [BM, BN])
    with pytest.raises(tlxc.CompilationError, match="'offsets' needs 2 entries"):
        from tlxc.compiler import frontend
        frontend(bad, specialization_from_args(bad, {"in_desc": a}))


@pytest.mark.parametrize("col_in,col_out,error", [
    (4, 8, None), (0, 0, None),
    (1, 0, "a TMA load in program (0, 0, 0) starts its box at innermost coordinate 1 (4 bytes of f32)"),
    (8, 2, "a TMA store in program (0, 0, 0) starts its box at innermost coordinate 2 (8 bytes of f32)")])
def test_interpreter_refuses_a_box_starting_between_16_byte_chunks(col_in, col_out, error):
    """A TMA copy's box starts at a 16-byte multiple of the innermost dimension (the GPU raises an
    illegal instruction otherwise: session 15, the attention backward's row statistics copied from a
    packed sequence's first row); the refusal names the copy's line."""
    x = torch.randn(2, 100)
    out = torch.full((2, 100), float("nan"))
    a = tlxc.TensorDescriptor.from_tensor(x, [1, 16])
    b = tlxc.TensorDescriptor.from_tensor(out, [1, 16])
    run = tlxc.interpret(K.tma_row_copy)[(1,)]
    if error is None:
        run(a, b, col_in, col_out, BN=16)
        assert torch.equal(out[0, col_out:col_out + 16], x[0, col_in:col_in + 16])
        return
    with pytest.raises(InterpreterError) as info:
        run(a, b, col_in, col_out, BN=16)
    text = str(info.value)
    line = _line("# the row's load" if "load" in error else "# the row's store")
    assert error in text and f"kernels_tma.py:{line}" in text, text


@pytest.mark.parametrize("seed", range(4))
def test_interpreter_names_a_read_before_the_tma_wait(monkeypatch, seed):
    """Whether or not the box has landed when the read runs (the seed picks the
    interleaving), the read is a race naming the read and the load."""
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "off")      # the static check would stop it at compile time
    x = torch.randn(BM, BN)
    out = torch.empty(BM * BN)
    desc = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    with pytest.raises(RaceError) as info:
        tlxc.interpret(K.tma_read_before_wait, seed=seed)[(1,)](desc, out, BM=BM, BN=BN)
    text = info.value.render()
    assert "read of 'buf'[0] in task 'main' is not ordered after the asynchronous TMA load" in text, text
    assert f"kernels_tma.py:{_line('# the early read')}" in text and f"kernels_tma.py:{_line('# the load')}" in text


def _line(marker: str) -> int:
    lines = (Path(K.__file__)).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if marker in line)


def test_tma_kernel_compiles_for_both_archs():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    x = torch.randn(64, 128)
    a = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    spec = specialization_from_args(K.tma_add_one, {"in_desc": a, "out_desc": a, "BM": BM, "BN": BN, "PREFETCH": False})
    for arch in ("sm_90a", "sm_100a"):
        compiled = compile_kernel(K.tma_add_one, spec, arch=arch, num_warps=4)
        assert compiled.asm["cubin"][:4] == b"\x7fELF"
        assert "tlx_tma_load_2d" in compiled.asm["cuda"] and "const __grid_constant__ tlx_tensormap" in \
            compiled.asm["cuda"]


@pytest.mark.gpu
@pytest.mark.parametrize("prefetch", [False, True], ids=["", "l2-prefetch"])
@pytest.mark.parametrize("shape", [(32, 64), (100, 132)])
def test_gpu_tma_round_trip(shape, prefetch):
    x = torch.randn(*shape, device="cuda")
    out = torch.full(shape, float("nan"), device="cuda")
    _launch(x, out, interpret=False, prefetch=prefetch)
    torch.cuda.synchronize()
    assert torch.equal(out, x + 1)


def _store_reuse(device, interpret=False):
    rounds = 8
    out = torch.full((rounds * BM, BN), float("nan"), device=device)
    desc = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    launcher = tlxc.interpret(K.tma_store_reuse) if interpret else K.tma_store_reuse
    launcher[(1,)](desc, BM=BM, BN=BN, ROUNDS=rounds, num_warps=4)
    base = torch.arange(BM * BN, dtype=torch.float32, device=device).reshape(BM, BN)
    return out, torch.cat([base + r * 4096.0 for r in range(rounds)])


def test_interpreter_store_reuse():
    out, want = _store_reuse("cpu", interpret=True)
    assert torch.equal(out, want)


def _store_ring(device, pending, interpret=False):
    rounds = 6
    out = torch.full((rounds * BM, BN), float("nan"), device=device)
    desc = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    launcher = tlxc.interpret(K.tma_store_ring) if interpret else K.tma_store_ring
    launcher[(1,)](desc, BM=BM, BN=BN, ROUNDS=rounds, PENDING=pending, num_warps=4)
    base = torch.arange(BM * BN, dtype=torch.float32, device=device).reshape(BM, BN)
    return out, torch.cat([base + r * 4096.0 for r in range(rounds)])


def test_interpreter_store_ring_waits_for_the_other_buffer_only():
    out, want = _store_ring("cpu", pending=1, interpret=True)
    assert torch.equal(out, want)


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_interpreter_store_wait_too_weak_is_a_race():
    """A TMA store reads its buffer after it is issued: rewriting the buffer while the wait
    still lets that store be pending is a race naming the rewrite and the store."""
    with pytest.raises(RaceError, match=r"may overwrite the slot while the asynchronous TMA store .*"
                                        r"async_descriptor_store_wait\(n\)") as info:
        _store_ring("cpu", pending=2, interpret=True)
    text = str(info.value)
    assert "tlx.local_store(buf[r % 2]" in text and "tlx.async_descriptor_store(out_desc" in text


def test_store_wait_holds_every_thread_of_the_task():
    """Bulk groups belong to the thread that issued the store; the wait must be followed by
    a barrier, or the other threads overwrite the buffer while the store still reads it."""
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    out = torch.empty(8 * BM, BN)
    desc = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    spec = specialization_from_args(K.tma_store_reuse, {"out_desc": desc, "BM": BM, "BN": BN, "ROUNDS": 8})
    cuda = compile_kernel(K.tma_store_reuse, spec, arch="sm_90a", num_warps=4).asm["cuda"]
    lines = [line.strip() for line in cuda.splitlines()]
    # (the last line of the kernel's, every thread's, wait before exit: rules_tlx.wait_stores_at_exit)
    assert lines[-2:] == ["tlx_bulk_wait_group_read<0>();", "}"]
    waits = [i for i, line in enumerate(lines[:-2]) if "tlx_bulk_wait_group_read<0>()" in line]
    assert len(waits) == 9
    assert all(lines[i + 1].startswith("__syncthreads()") or "bar_sync" in lines[i + 1] for i in waits), \
        [lines[i + 1] for i in waits]


@pytest.mark.gpu
def test_gpu_store_reuse():
    out, want = _store_reuse("cuda")
    torch.cuda.synchronize()
    assert torch.equal(out, want)


@pytest.mark.gpu
def test_gpu_store_ring():
    out, want = _store_ring("cuda", pending=1)
    torch.cuda.synchronize()
    assert torch.equal(out, want)


def test_misaligned_rows_are_a_launch_error_naming_the_rule():
    x = torch.randn(100, 130)                      # 520-byte rows: TMA needs 16-byte multiples
    with pytest.raises(tlxc.LaunchError, match="16-byte"):
        tlxc.TensorDescriptor.from_tensor(x, [BM, BN])


def test_swizzle_can_be_turned_off_and_is_checked():
    x = torch.randn(64, 64, dtype=torch.bfloat16)
    assert tlxc.TensorDescriptor.from_tensor(x, [64, 64]).swizzle == 128     # a 128-byte inner box
    assert tlxc.TensorDescriptor.from_tensor(x, [64, 64], swizzle=0).swizzle == 0
    with pytest.raises(tlxc.LaunchError, match="'swizzle'"):
        tlxc.TensorDescriptor.from_tensor(x, [64, 64], swizzle=64)
