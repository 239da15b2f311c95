"""``tlxc.ops.grouped_weight_grad`` on the warp-specialized TMA kernel (``wws_`` configurations,
``kernels/grouped_wgrad_ws.py``): on the interpreter against float64 (groups ending inside a 64-row
k-step followed by another group, whose rows the kernel must not count; an empty group; rows past the
groups' sum; a bf16 output TMA-stored, a float32 one through pointers with K not a multiple of the tile);
the sm_90a compile without spills; ``tlxc check``; the argument check; the GPU run."""
from __future__ import annotations

import pytest
import torch
from launch_check import check_findings, record_launch

import tlxc.ops.grouped as grouped_module
from tlxc.ops.grouped import WGRAD_WS_CONFIGS, grouped_weight_grad

WS = sorted(WGRAD_WS_CONFIGS)


def _reference(a, grad, sizes, E):
    starts = [0] + torch.tensor(sizes).cumsum(0).tolist()
    return torch.stack([a[starts[e]:starts[e + 1]].double().t() @ grad[starts[e]:starts[e + 1]].double()
                        for e in range(E)])


@pytest.mark.parametrize("config", WS)
@pytest.mark.parametrize("K,N,out_dtype", [(256, 384, torch.bfloat16), (200, 136, torch.float32)])
def test_ws_weight_grad_matches_float64(config, K, N, out_dtype, monkeypatch):
    """3 persistent programs over every tile; group 0 ends 2 rows into its third k-step, where group 2's
    first rows follow (without the zeroed rows their products would count), group 1 is empty, the last
    group has one row, and 40 rows past the groups' sum belong to no expert."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(K + N)
    sizes = [130, 0, 70, 300, 1]
    M = sum(sizes) + 40
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    grad = torch.randn(M, N, generator=g).to(torch.bfloat16)
    out = grouped_weight_grad(a, grad, torch.tensor(sizes, dtype=torch.int32), out_dtype, config=config)
    ref = _reference(a, grad, sizes, len(sizes))
    assert out.shape == (5, K, N) and out.dtype == out_dtype and torch.isfinite(out).all()
    assert (out[1] == 0).all()                                            # the empty expert
    tol = 1e-6 if out_dtype == torch.float32 else 8e-3
    assert ((out.double() - ref).norm() / ref.norm()).item() < tol


def test_ws_weight_grad_refuses_operands_tma_cannot_read():
    a = torch.randn(64, 200, dtype=torch.bfloat16)[:, :100]              # rows of 200 bytes: aligned, but
    grad = torch.randn(64, 36, dtype=torch.bfloat16)[:, 1:33]            # a misaligned base here
    with pytest.raises(ValueError, match="reads 'a' and 'grad' by TMA"):
        grouped_weight_grad(a, grad, torch.tensor([30, 34]), config="wws_128x128x64_s6")


@pytest.mark.parametrize("config", WS)
@pytest.mark.parametrize("E", [8, 256])
def test_ws_weight_grad_compiles_for_sm90a(config, E):
    """As the host launches it at MoE shapes (E = 8, K = 4096, N = 14336; E = 256): no spills,
    within the shared memory at any expert count (E = 64 overflowed it by 64 bytes on the H100 while
    the group rows came from a scan, whose scratch grew with E), wgmma and TMA loads and stores."""
    from tlxc import language as tl
    from tlxc.descriptors import TensorDescriptor
    from tlxc.ops.kernels.grouped_wgrad_ws import grouped_wgrad_ws_kernel
    bm, bn, br, stages = WGRAD_WS_CONFIGS[config]
    M, K, N = (16384, 4096, 14336) if E == 8 else (4096, 512, 256)     # (E = 256: a smaller output to hold)
    a, d = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(M, N, dtype=torch.bfloat16)
    out = torch.empty(E, K, N, dtype=torch.bfloat16)
    h = grouped_wgrad_ws_kernel.warmup(
        TensorDescriptor.from_tensor(a, [br, bm // 2], swizzle=128), TensorDescriptor.from_tensor(d, [br, 64], swizzle=128),
        TensorDescriptor.from_tensor(out.view(E * K, N), [bm // 2, 64], swizzle=128), out,
        torch.empty(E, dtype=torch.int32), M, E, K, N, 132, out.stride(0), out.stride(1), out.stride(2), BM=bm, BN=bn,
        BR=br, NUM_STAGES=stages, GROUP_M=8, DTYPE=tl.bfloat16, E_PAD=E, C_TMA=True, OUT_DTYPE=tl.bfloat16,
        B_BOX_N=64, num_warps=4, grid=(132,))
    code = h.asm["cuda"]
    assert h.n_spills == 0 and h.metadata.shared <= 232448
    assert h.perf_warnings == []       # no assertion in the kernel: with one, ptxas serialized every wgmma (C7510)
    assert "wgmma.mma_async" in code and "cp.async.bulk.tensor" in code
    assert "cp.async.bulk.tensor.2d.global.shared" in code                 # the TMA store


@pytest.mark.parametrize("config", WS)
def test_ws_weight_grad_launch_checks_clean(config, monkeypatch):
    """``tlxc check`` of the kernel as the host launches it: no finding above a note."""
    a, grad = torch.randn(150, 128).to(torch.bfloat16), torch.randn(150, 256).to(torch.bfloat16)
    kernel, args, meta = record_launch(monkeypatch, grouped_module, "grouped_wgrad_ws_kernel", lambda: grouped_weight_grad(
        a, grad, torch.tensor([100, 0, 50], dtype=torch.int32), config=config))
    assert [f for f in check_findings(kernel, args, meta) if f.severity != "note"] == []


@pytest.mark.gpu
@pytest.mark.parametrize("config", WS)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_ws_weight_grad_on_the_gpu(config, out_dtype):
    """On the GPU, at a MoE-like draw (an empty expert, groups ending mid-step, rows past the sum),
    against float64 and against the pointer kernel."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = torch.Generator().manual_seed(13)
    sizes = [300, 0, 517, 64, 1, 1166]
    M, K, N = sum(sizes) + 77, 1024, 2048 + 136
    a = torch.randn(M, K, generator=g).to(torch.bfloat16).cuda()
    grad = torch.randn(M, N, generator=g).to(torch.bfloat16).cuda()
    s = torch.tensor(sizes, dtype=torch.int32, device="cuda")
    out = grouped_weight_grad(a, grad, s, out_dtype, config=config)
    ref = _reference(a, grad, sizes, len(sizes))
    assert torch.isfinite(out).all() and (out[1] == 0).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < (1e-5 if out_dtype == torch.float32 else 8e-3)
    pointer = grouped_weight_grad(a, grad, s, out_dtype)
    assert ((out.double() - pointer.double()).norm() / ref.norm()).item() < (1e-5 if out_dtype == torch.float32
                                                                             else 8e-3)
