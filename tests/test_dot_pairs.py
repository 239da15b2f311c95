"""fuse-dot-pairs (``passes/dot_pairs.py``): two ``tlx.async_dot`` products on one shared A whose
K-major B buffers come from two rings indexed alike are issued as one ``m64n(N1+N2)`` wgmma, the
second ring's buffers placed right after the first's (``allocate-shared``: interleaved, one pitch).
Checked on the interpreter (which never fuses), the CUDA text (what is fused, where it must not
be), the text under the host emulation and, with the ``gpu`` marker, on the GPU, against float64."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.language import tlx
from tlxc.runtime.warmup import cuda_source


@tlxc.kernel
def main_and_tail(a_ptr, b_ptr, c_ptr, t_ptr, slot, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                  TAIL: tl.constexpr, RING: tl.constexpr, WAIT_FIRST: tl.constexpr):
    """c = a @ b[slot, :N].T, t = a @ b[slot, N:].T: a [M, K], b [RING, N + TAIL, K] (K-major rows),
    each ring buffer filled from its own rows; ``WAIT_FIRST``: the first product is waited for
    alone (``async_dot_wait(1)``) before the second."""
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    rt = tl.arange(0, TAIL)
    a_smem = tlx.local_alloc((M, K), tl.bfloat16, 1)
    b_main = tlx.local_alloc((N, K), tl.bfloat16, RING)
    b_tail = tlx.local_alloc((TAIL, K), tl.bfloat16, RING)
    tlx.local_store(a_smem[0], tl.load(a_ptr + rm[:, None] * K + rk[None, :]))
    for s in tl.static_range(RING):
        rows = b_ptr + s * (N + TAIL) * K
        tlx.local_store(b_main[s], tl.load(rows + rn[:, None] * K + rk[None, :]))
        tlx.local_store(b_tail[s], tl.load(rows + (N + rt[:, None]) * K + rk[None, :]))
    tlx.fence("async_shared")
    c = tlx.async_dot(a_smem[0], tlx.local_trans(b_main[slot]), tl.zeros((M, N), dtype=tl.float32))
    t = tlx.async_dot(a_smem[0], tlx.local_trans(b_tail[slot]), tl.zeros((M, TAIL), dtype=tl.float32))
    if WAIT_FIRST:
        c = tlx.async_dot_wait(1, c)
    c = tlx.async_dot_wait(0, c)
    t = tlx.async_dot_wait(0, t)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
    tl.store(t_ptr + rm[:, None] * TAIL + rt[None, :], t)


CASES = [(64, 128, 32, 3), (128, 64, 16, 2), (64, 128, 64, 2)]       # M, N, TAIL, RING (K = 64)
K = 64


def _case(M, N, TAIL, RING, wait_first=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(RING, N + TAIL, K, generator=gen).to(torch.bfloat16)
    slot = RING - 1
    ref = a.double() @ b[slot].double().t()
    c = torch.full((M, N), float("nan"))
    t = torch.full((M, TAIL), float("nan"))
    meta = {"M": M, "K": K, "N": N, "TAIL": TAIL, "RING": RING, "WAIT_FIRST": wait_first}
    return [a, b, c, t, slot], meta, ref


def _close(c, t, ref, N):
    for got, want in ((c, ref[:, :N]), (t, ref[:, N:])):
        err = (got.double() - want).abs().max().item()
        assert err <= 1e-3 * want.abs().max().item(), err


def _text(args, meta):
    return cuda_source(main_and_tail, args, dict(meta, num_warps=4), (1,), "sm_90a")


@pytest.mark.parametrize("M,N,TAIL,RING", CASES)
def test_interpreter_matches_float64(M, N, TAIL, RING):
    args, meta, ref = _case(M, N, TAIL, RING)
    tlxc.interpret(main_and_tail, (1,), args, meta)
    _close(args[2], args[3], ref, N)


@pytest.mark.parametrize("M,N,TAIL,RING", CASES)
def test_one_wider_wgmma_and_the_tail_ring_after_the_main_ring(M, N, TAIL, RING):
    args, meta, _ = _case(M, N, TAIL, RING)
    body = _text(args, meta)
    body = body[body.index("__global__"):]
    assert f"m64n{N + TAIL}k16" in body and f"m64n{N}k16" not in body and f"m64n{TAIL}k16" not in body
    main = re.search(r"b_main = reinterpret_cast<unsigned short\*>\(tlx_smem \+ (\d+)\);", body)
    tail = re.search(r"b_tail = reinterpret_cast<unsigned short\*>\(tlx_smem \+ (\d+)\);", body)
    assert int(tail.group(1)) == int(main.group(1)) + N * K * 2      # buffer i's tail right after its main rows
    pitch = (N + TAIL) * K                                             # elements from buffer i to i + 1
    for ring in ("b_main", "b_tail"):
        steps = set(re.findall(rf"{ring} \+ \w+ \* (\d+);", body))
        assert steps == {str(pitch)}, (ring, steps)


def test_a_wait_between_the_products_keeps_them_apart():
    """``async_dot_wait(1)`` retires the first product alone: fused, one group would be pending."""
    args, meta, ref = _case(64, 128, 32, 2, wait_first=True)
    body = _text(args, meta)
    assert "m64n128k16" in body and "m64n32k16" in body and "m64n160k16" not in body
    if emu.available():
        names = ("a_ptr", "b_ptr", "c_ptr", "t_ptr", "slot")
        emu.build(body).run(dict(zip(names, args)), grid=(1,), threads=128)
        _close(args[2], args[3], ref, 128)


def test_the_pass_can_be_left_out(monkeypatch):
    monkeypatch.setenv("TLXC_SKIP_PASSES", "fuse-dot-pairs")
    args, meta, _ = _case(64, 128, 32, 2)
    body = _text(args, meta)
    assert "m64n128k16" in body and "m64n32k16" in body and "m64n160k16" not in body


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("M,N,TAIL,RING", CASES)
def test_cuda_text_matches_float64_on_the_emulation(M, N, TAIL, RING):
    args, meta, ref = _case(M, N, TAIL, RING)
    names = ("a_ptr", "b_ptr", "c_ptr", "t_ptr", "slot")
    emu.build(_text(args, meta)).run(dict(zip(names, args)), grid=(1,), threads=128)
    _close(args[2], args[3], ref, N)


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,TAIL,RING", CASES)
def test_gpu_matches_float64(M, N, TAIL, RING):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    args, meta, ref = _case(M, N, TAIL, RING)
    args = [x.cuda() if isinstance(x, torch.Tensor) else x for x in args]
    main_and_tail[(1,)](*args, num_warps=4, **meta)
    _close(args[2].cpu(), args[3].cpu(), ref, N)


@tlxc.kernel
def row_slices(a_ptr, b_ptr, c_ptr, t_ptr, slot, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
               TAIL: tl.constexpr, RING: tl.constexpr, GAP: tl.constexpr):
    """As ``main_and_tail`` with both B operands row slices of one ring buffer of ``N + GAP + TAIL`` rows:
    rows ``0 .. N`` and ``N + GAP ..`` (adjacent when ``GAP`` is 0)."""
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    ROWS: tl.constexpr = N + GAP + TAIL
    rn = tl.arange(0, N)
    rt = tl.arange(0, TAIL)
    a_smem = tlx.local_alloc((M, K), tl.bfloat16, 1)
    b_ring = tlx.local_alloc((ROWS, K), tl.bfloat16, RING)
    tlx.local_store(a_smem[0], tl.load(a_ptr + rm[:, None] * K + rk[None, :]))
    for s in tl.static_range(RING):
        rows = b_ptr + s * ROWS * K
        tlx.local_store(tlx.local_slice(b_ring[s], [0, 0], [N, K]), tl.load(rows + rn[:, None] * K + rk[None, :]))
        tlx.local_store(tlx.local_slice(b_ring[s], [N + GAP, 0], [TAIL, K]),
                        tl.load(rows + (N + GAP + rt[:, None]) * K + rk[None, :]))
    tlx.fence("async_shared")
    main = tlx.local_slice(b_ring[slot], [0, 0], [N, K])
    tail = tlx.local_slice(b_ring[slot], [N + GAP, 0], [TAIL, K])
    c = tlx.async_dot(a_smem[0], tlx.local_trans(main), tl.zeros((M, N), dtype=tl.float32))
    t = tlx.async_dot(a_smem[0], tlx.local_trans(tail), tl.zeros((M, TAIL), dtype=tl.float32))
    c = tlx.async_dot_wait(0, c)
    t = tlx.async_dot_wait(0, t)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
    tl.store(t_ptr + rm[:, None] * TAIL + rt[None, :], t)


@pytest.mark.parametrize("N,TAIL,GAP", [(128, 32, 0), (64, 16, 0), (64, 16, 16)])
def test_adjacent_row_slices_of_one_buffer_fuse(N, TAIL, GAP):
    """Row slices that follow each other in one buffer are one ``m64n(N+TAIL)`` (nothing to interleave);
    a gap between them keeps two products.  The text's numbers match float64 on the emulation."""
    M, RING = 64, 2
    gen = torch.Generator().manual_seed(N + GAP)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(RING, N + GAP + TAIL, K, generator=gen).to(torch.bfloat16)
    slot = 1
    ref = a.double() @ torch.cat([b[slot, :N], b[slot, N + GAP:]]).double().t()
    args = [a, b, torch.full((M, N), float("nan")), torch.full((M, TAIL), float("nan")), slot]
    meta = {"M": M, "K": K, "N": N, "TAIL": TAIL, "RING": RING, "GAP": GAP}
    text = cuda_source(row_slices, args, dict(meta, num_warps=4), (1,), "sm_90a")
    body = text[text.index("__global__"):]
    fused = f"m64n{N + TAIL}k16" in body
    assert fused == (GAP == 0) and (f"m64n{N}k16" in body) == (GAP > 0)
    tlxc.interpret(row_slices, (1,), args, meta)
    _close(args[2], args[3], ref, N)
    if emu.available():
        args[2].fill_(float("nan"))
        args[3].fill_(float("nan"))
        emu.build(text).run(dict(zip(("a_ptr", "b_ptr", "c_ptr", "t_ptr", "slot"), args)), grid=(1,), threads=128)
        _close(args[2], args[3], ref, N)
