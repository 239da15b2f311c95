"""The launch paths on a GPU: the slow path, the generic and the per-specialization fast
paths (which packs and launches through the driver launcher inline) give the same results
launch after launch, across specializations, TMA descriptors whose tensors change, clusters,
and a module global reassigned between launches (issue 21)."""
from __future__ import annotations

import pytest

import tlxc
import tlxc.language as tl

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

SCALE = 2.0


@tlxc.kernel
def axpb(x_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (a * x * SCALE).to(out_ptr.dtype.element_ty), mask=mask)


def _run(x, a, n, dtype=torch.float32, block=128):
    out = torch.full((x.numel(),), float("nan"), device="cuda", dtype=dtype)   # poisoned
    axpb[(tlxc.cdiv(n, block),)](x, out, a, n, BLOCK=block)
    return out


@pytest.fixture(autouse=True)
def _fresh():
    yield
    global SCALE
    SCALE = 2.0


def test_repeated_launches_across_specializations():
    for round_ in range(3):
        for dtype, n, a in ((torch.float32, 1000, 0.5), (torch.float16, 1000, 0.5), (torch.float32, 1001, 3),
                            (torch.float32, 1, 1.0), (torch.bfloat16, 4096, -2.0), (torch.float32, 1000, 0.5)):
            x = torch.randn(n + 37, device="cuda").to(dtype)[:n]           # fresh data, ragged sizes
            out = _run(x, a, n, dtype)
            torch.cuda.synchronize()
            want = (a * x.double() * SCALE)
            tol = 1e-6 if dtype == torch.float32 else 1e-2
            torch.testing.assert_close(out[:n].double(), want, rtol=tol, atol=tol, msg=f"round {round_} {dtype} n={n}")
    assert axpb._fast is not axpb._generic                    # the last launches took a specialized path


def test_a_misaligned_view_and_a_held_launcher():
    base = torch.randn(2048, device="cuda")
    launch = axpb[(16,)]
    for offset in (0, 1, 0, 4, 0):                            # 1: a 4-byte aligned view (another key)
        x = base[offset:offset + 2000]
        out = torch.full((2000,), float("nan"), device="cuda")
        launch(x, out, 1.5, 2000, BLOCK=128)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 1.5 * x * SCALE)


def test_a_reassigned_global_is_compiled_in():
    global SCALE
    x = torch.randn(500, device="cuda")
    for scale in (2.0, 2.0, 3.0, 3.0, 0.5):
        SCALE = scale
        for _ in range(3):
            out = _run(x, 1.0, 500)
            torch.cuda.synchronize()
            torch.testing.assert_close(out, x * scale)


def test_tma_descriptor_of_a_changing_tensor():
    import kernels_tma as K
    BM, BN = 32, 64
    for rows, cols in ((96, 128), (100, 132), (7, 200), (96, 128)):   # new tensors: new maps, one key
        a = torch.randn(rows, cols, device="cuda")
        out = torch.full_like(a, float("nan"))
        K.tma_add_one[(tlxc.cdiv(rows, BM), tlxc.cdiv(cols, BN))](
            tlxc.TensorDescriptor.from_tensor(a, [BM, BN]), tlxc.TensorDescriptor.from_tensor(out, [BM, BN]),
            BM=BM, BN=BN)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, a + 1.0)


def test_cluster_launches_check_the_grid():
    import kernels_cluster as K
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("clusters need sm_90")
    for _ in range(3):
        out = torch.full((8,), -1, dtype=torch.int32, device="cuda")
        K.cluster_ids[(8,)](out, ctas_per_cga=(2, 1, 1))
        torch.cuda.synchronize()
        assert out.tolist() == [2, 102] * 4
    with pytest.raises(tlxc.LaunchError, match="multiple of ctas_per_cga"):
        K.cluster_ids[(7,)](out, ctas_per_cga=(2, 1, 1))


def _c_launcher_or_skip():
    from tlxc.runtime import c_launcher
    if c_launcher.module() is None:
        pytest.skip("the C launcher cannot be built here (no C compiler or Python headers)")


def test_the_c_launcher_serves_repeated_launches_on_any_stream():
    _c_launcher_or_skip()
    for _ in range(3):
        x = torch.randn(3000, device="cuda")
        out = _run(x, 0.25, 3000)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 0.25 * x * SCALE)
    assert type(axpb._fast).__name__ == "CLaunch"
    side = torch.cuda.Stream()
    x = torch.randn(3000, device="cuda")
    out = torch.full((3000,), float("nan"), device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)                          # the launch must queue behind this
        axpb[(tlxc.cdiv(3000, 128),)](x, out, -1.0, 3000, BLOCK=128)
    side.synchronize()
    torch.testing.assert_close(out, -x * SCALE)


def test_cuda_graph_capture_through_the_c_launcher():
    _c_launcher_or_skip()
    x = torch.randn(4096, device="cuda")
    out = torch.full((4096,), float("nan"), device="cuda")
    for _ in range(3):
        axpb[(32,)](x, out, 2.0, 4096, BLOCK=128)
    assert type(axpb._fast).__name__ == "CLaunch"
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        axpb[(32,)](x, out, 2.0, 4096, BLOCK=128)
    for _ in range(2):
        x.copy_(torch.randn(4096, device="cuda"))              # new data, same addresses
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2.0 * x * SCALE)
