"""Every example against torch on the GPU: shapes that are not multiples of the
block (masks exercised), fresh random inputs, NaN-poisoned outputs, relative
error bounded for the dtype.  Skipped without a GPU."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

pytestmark = pytest.mark.gpu


def rel_error(out, ref) -> float:
    out64, ref64 = out.double(), ref.double()
    return ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item()


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


@pytest.mark.parametrize("n", [1, 1000, 4099, 98_432, 1 << 20])
@pytest.mark.parametrize("block,num_warps", [(1024, 4), (4096, 8)])
def test_vector_add(n, block, num_warps):
    from vector_add import add
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = add(x, y, poisoned((n,), torch.float32), block=block, num_warps=num_warps)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1, 1), (7, 100), (1823, 781), (64, 8192), (3, 12000)])
def test_softmax(shape):
    from softmax import softmax
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 3
    out = softmax(x, poisoned(shape, torch.bfloat16))
    assert torch.isfinite(out).all()
    assert rel_error(out, torch.softmax(x.double(), -1)) < 8e-3


@pytest.mark.parametrize("shape", [(5, 97), (333, 4000), (64, 8192)])
def test_rmsnorm(shape):
    from rmsnorm import reference, rmsnorm
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
    out = rmsnorm(x, w, 1e-6, poisoned(shape, torch.bfloat16))
    assert torch.isfinite(out).all()
    assert rel_error(out, reference(x.double(), w.double(), 1e-6)) < 8e-3


@pytest.mark.parametrize("shape", [(5, 97), (333, 4000), (64, 8192)])
def test_layernorm(shape):
    from layernorm import layernorm, reference
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16) + 0.5
    w = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
    b = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
    out = layernorm(x, w, b, 1e-5, poisoned(shape, torch.bfloat16))
    assert torch.isfinite(out).all()
    assert rel_error(out, reference(x.double(), w.double(), b.double(), 1e-5)) < 8e-3


@pytest.mark.parametrize("m,n,k", [(1000, 1240, 776), (64, 64, 64), (129, 33, 200)])
@pytest.mark.parametrize("config", [{"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4},
                                    {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8}])
def test_matmul(m, n, k, config):
    from matmul import matmul
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    out = matmul(a, b, poisoned((m, n), torch.bfloat16), **config)
    assert torch.isfinite(out).all()
    assert rel_error(out, a.double() @ b.double()) < 1e-2


def test_graph_capture_replays_bitwise():
    from softmax import softmax
    x = torch.randn(300, 1000, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    softmax(x, out)            # compile outside the capture
    eager = out.clone()
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        softmax(x, out)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)


def test_launch_on_side_stream():
    from vector_add import add
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    out = poisoned((5000,), torch.float32)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        add(x, y, out)
    stream.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_mixed_devices_is_a_launch_error():
    from vector_add import add_kernel

    import tlxc
    x = torch.randn(100, device="cuda")
    with pytest.raises(tlxc.LaunchError, match="CPU tensor"):
        add_kernel[(1,)](x, torch.randn(100), x, 100)


def test_wrong_dtype_is_a_launch_error():
    from vector_add import add_kernel

    import tlxc
    x = torch.randn(100, device="cuda")
    with pytest.raises(tlxc.LaunchError, match="declares"):
        add_kernel[(1,)](x, x.half(), x, 100)


def test_wrong_argument_count_is_a_launch_error():
    from vector_add import add_kernel

    import tlxc
    x = torch.randn(100, device="cuda")
    with pytest.raises(tlxc.LaunchError, match="missing"):
        add_kernel[(1,)](x, x, x)
