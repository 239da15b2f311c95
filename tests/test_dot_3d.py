"""A 3-D ``tl.dot`` (Triton's batched form, ``[B, M, K] @ [B, K, N]``): one 2-D product per batch
index, with ``acc``, ``out_dtype`` and the 2-D rule's checks, on the interpreter against float64
(poisoned outputs), compiled for sm_90a, and the errors of mismatched batches."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError


@tlxc.jit
def batched_dot(a_ptr, b_ptr, c_ptr, acc_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                WITH_ACC: tl.constexpr, OUT_F16: tl.constexpr):
    ob = tl.arange(0, B)[:, None, None]
    om = tl.arange(0, M)[None, :, None]
    on = tl.arange(0, N)[None, None, :]
    ok = tl.arange(0, K)
    a = tl.load(a_ptr + ob * M * K + om * K + ok[None, None, :])
    b = tl.load(b_ptr + ob * K * N + ok[None, :, None] * N + on)
    if WITH_ACC:
        c = tl.dot(a, b, tl.load(acc_ptr + ob * M * N + om * N + on))
    elif OUT_F16:
        c = tl.dot(a, b, out_dtype=tl.float16)
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + ob * M * N + om * N + on, c)


def _run(B, M, N, K, dtype=torch.bfloat16, with_acc=False, out_f16=False):
    g = torch.Generator().manual_seed(B * 1000 + M + N + K)
    a = torch.randn(B, M, K, generator=g).to(dtype)
    b = torch.randn(B, K, N, generator=g).to(dtype)
    acc = torch.randn(B, M, N, generator=g)
    out = torch.full((B, M, N), float("nan"), dtype=torch.float16 if out_f16 else torch.float32)
    batched_dot[(1,)](a, b, out, acc, B=B, M=M, N=N, K=K, WITH_ACC=with_acc, OUT_F16=out_f16)
    ref = a.double() @ b.double() + (acc.double() if with_acc else 0)
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("B,M,N,K", [(1, 16, 16, 16), (2, 32, 16, 64), (4, 16, 32, 16), (8, 16, 16, 32)])
def test_each_batch_is_its_own_product(B, M, N, K):
    assert _run(B, M, N, K) < 1e-2


def test_acc_and_out_dtype_per_batch():
    assert _run(4, 32, 32, 16, with_acc=True) < 1e-2
    assert _run(2, 16, 32, 32, out_f16=True) < 2e-3
    assert _run(2, 16, 16, 16, dtype=torch.float16) < 2e-3


@pytest.mark.parametrize("B,M", [(2, 64), (4, 32)])
def test_compiles_for_sm90a(B, M):
    k = batched_dot.compile("a_ptr=*bf16, b_ptr=*bf16, c_ptr=*fp32, acc_ptr=*fp32",
                            {"B": B, "M": M, "N": M, "K": 32, "WITH_ACC": True, "OUT_F16": False},
                            arch="sm_90a", num_warps=4)
    assert k.asm["cubin"][:4] == b"\x7fELF" and k.metadata["spills_bytes"] == 0


@tlxc.jit
def mismatched(a_ptr, c_ptr, B1: tl.constexpr, B2: tl.constexpr):
    x = tl.load(a_ptr + tl.arange(0, B1 * 256)).reshape(B1, 16, 16)
    y = tl.load(a_ptr + tl.arange(0, B2 * 256)).reshape(B2, 16, 16)
    tl.store(c_ptr + tl.arange(0, B1 * 256), tl.dot(x, y).reshape(B1 * 256))


@pytest.mark.parametrize("B1,B2,message", [(2, 4, "the batch dims of a 3-D dot differ"),
                                           (1, 1, None)])
def test_batch_errors_name_the_shapes(B1, B2, message):
    if message is None:
        mismatched.compile("a_ptr=*fp16, c_ptr=*fp32", {"B1": B1, "B2": B2}, stages=("ir",))
        return
    with pytest.raises(CompilationError, match=message):
        mismatched.compile("a_ptr=*fp16, c_ptr=*fp32", {"B1": B1, "B2": B2}, stages=("ir",))


@pytest.mark.gpu
@pytest.mark.parametrize("B", [2, 4])
def test_batched_dot_on_the_gpu(B):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(B)
    M, N, K = 64, 32, 64
    a = torch.randn(B, M, K, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(B, K, N, device="cuda", generator=g).to(torch.bfloat16)
    acc = torch.randn(B, M, N, device="cuda", generator=g)
    out = torch.full((B, M, N), float("nan"), device="cuda")
    batched_dot[(1,)](a, b, out, acc, B=B, M=M, N=N, K=K, WITH_ACC=True, OUT_F16=False)
    ref = a.double() @ b.double() + acc.double()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2
