"""Triton's pre-3.4 host TMA API (runtime/tma_legacy.py): ``driver.active.utils.fill_1d/2d_tma_descriptor``
fill a CPU buffer, an object with ``tma_desc_cpu_ptr()`` is the kernel argument, and the kernel reads
and writes through it with ``tl._experimental_descriptor_load/store``; the fills may happen inside the
grid function, as the tutorials of that time do.  ``tlxc.tools.experimental_descriptor`` wraps the fills.

Interpreter runs against torch on fresh random data, NaN-poisoned outputs and shapes that are not
multiples of the box; refused inputs raise a LaunchError naming the call or the argument; a ``gpu``
version runs the same kernel with real tensor maps.
"""
from __future__ import annotations

import os

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import LaunchError
from tlxc.runtime.driver_api import active
from tlxc.tools.experimental_descriptor import create_1d_tma_descriptor, create_2d_tma_descriptor


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


class Buffer:
    """What the tutorials pass: a 128-byte CPU buffer behind ``tma_desc_cpu_ptr()``."""

    def __init__(self):
        self.bytes = torch.empty(128, dtype=torch.int8)

    def tma_desc_cpu_ptr(self):
        return self.bytes.data_ptr()


@tlxc.jit
def scale_tiles(in_desc, out_desc, M, N, factor, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    tile = tl._experimental_descriptor_load(in_desc, [pid_m * BM, pid_n * BN], [BM, BN], tl.float16)
    tl._experimental_descriptor_store(out_desc, (tile.to(tl.float32) * factor).to(tl.float16),
                                      [pid_m * BM, pid_n * BN])


@tlxc.jit
def copy_1d(in_desc, out_desc, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK
    tl._experimental_descriptor_store(out_desc, tl._experimental_descriptor_load(in_desc, [offs], [BLOCK],
                                                                                 tl.float32), [offs])


def _run_2d(x, out, BM, BN):
    m, n = x.shape
    a, c = Buffer(), Buffer()

    def grid(meta):      # filled here, once the block sizes are known (the tutorials' pattern)
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), m, n, meta["BM"], meta["BN"], x.element_size(),
                                            a.tma_desc_cpu_ptr())
        active.utils.fill_2d_tma_descriptor(out.data_ptr(), m, n, meta["BM"], meta["BN"], out.element_size(),
                                            c.tma_desc_cpu_ptr())
        return (triton_cdiv(m, meta["BM"]), triton_cdiv(n, meta["BN"]))
    scale_tiles[grid](a, c, m, n, 1.5, BM=BM, BN=BN)


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_fill_2d_in_grid_function_matches_torch():
    g = _gen()
    m, n = 45, 88                                   # not multiples of the 16 x 32 box
    x = torch.randn(m, n, generator=g).half()
    out = torch.full((m, n), float("nan")).half()
    _run_2d(x, out, 16, 32)
    ref = (x.double() * 1.5)
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).abs() / ref.abs().max()).max() < 2e-3


def test_refilled_buffer_takes_the_new_geometry():
    g = _gen()
    for m, n, bm, bn in ((40, 64, 16, 64), (33, 72, 32, 16)):
        x = torch.randn(m, n, generator=g).half()
        out = torch.full((m, n), float("nan")).half()
        _run_2d(x, out, bm, bn)
        # atol: half an fp16 subnormal ulp (2**-25); randn draws a subnormal in about one run in five,
        # and its product rounds to the subnormal grid, far past any relative tolerance
        assert torch.allclose(out.double(), x.double() * 1.5, rtol=2e-3, atol=2.0 ** -25)


def test_create_1d_descriptor():
    g = _gen()
    x = torch.randn(300, generator=g)
    out = torch.full((300,), float("nan"))
    a = create_1d_tma_descriptor(x.data_ptr(), 300, 64, 4)
    c = create_1d_tma_descriptor(out.data_ptr(), 300, 64, 4)
    copy_1d[(triton_cdiv(300, 64),)](a, c, BLOCK=64)
    assert torch.equal(out, x)


def test_create_2d_descriptor_of_a_row_block():
    g = _gen()
    x = torch.randn(64, 48, generator=g).half()
    out = torch.full((64, 48), float("nan")).half()
    # rows 16.. of x only: the descriptor starts mid-tensor
    a = create_2d_tma_descriptor(x[16:].data_ptr(), 48, 48, 16, 16, 2)
    c = create_2d_tma_descriptor(out[16:].data_ptr(), 48, 48, 16, 16, 2)
    scale_tiles[(3, 3)](a, c, 48, 48, 2.0, BM=16, BN=16)
    assert torch.isnan(out[:16].float()).all()
    assert torch.allclose(out[16:].double(), x[16:].double() * 2, rtol=2e-3, atol=0)


def test_bytes_not_from_a_fill_are_refused():
    x = torch.randn(32, 32).half()
    raw = Buffer()
    raw.bytes.random_(-100, 100)
    ok = create_2d_tma_descriptor(x.data_ptr(), 32, 32, 16, 16, 2)
    with pytest.raises(LaunchError, match=r"argument 'in_desc' of scale_tiles: .*not\s+filled by tlxc"):
        scale_tiles[(2, 2)](raw, ok, 32, 32, 1.0, BM=16, BN=16)


def test_bytes_changed_after_the_fill_are_refused():
    x = torch.randn(32, 32).half()
    a = create_2d_tma_descriptor(x.data_ptr(), 32, 32, 16, 16, 2)
    c = create_2d_tma_descriptor(x.data_ptr(), 32, 32, 16, 16, 2)
    c.desc[5] ^= 1
    with pytest.raises(LaunchError, match=r"argument 'out_desc' of scale_tiles: .*changed after"):
        scale_tiles[(2, 2)](a, c, 32, 32, 1.0, BM=16, BN=16)


def test_fill_of_memory_no_tensor_holds_is_refused():
    x = torch.randn(16, 16).half()
    buf = Buffer()
    with pytest.raises(LaunchError, match=r"fill_2d_tma_descriptor: no live torch tensor holds"):
        # the extent runs past x's storage
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), 64, 16, 16, 16, 2, buf.tma_desc_cpu_ptr())


def test_the_holder_scan_skips_tensors_without_storage():
    """The fill finds its tensor among live objects; fake tensors left alive by torch.compile
    tracing (they have no data pointer) are skipped, not a RuntimeError from tlxc."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = torch.empty(64, 64)          # noqa: F841  (alive during the scan)
    meta = torch.empty(64, 64, device="meta")   # noqa: F841
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
    with FunctionalTensorMode():
        functional = FunctionalTensor.to_functional(torch.zeros(4))    # noqa: F841  (data_ptr() raises)
    x = torch.randn(16, 16).half()
    buf = Buffer()
    with pytest.raises(LaunchError, match=r"no live torch tensor holds"):
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), 64, 16, 16, 16, 2, buf.tma_desc_cpu_ptr())
    active.utils.fill_2d_tma_descriptor(x.data_ptr(), 16, 16, 16, 16, 2, buf.tma_desc_cpu_ptr())


def test_fill_with_an_illegal_box_is_refused_at_the_fill():
    x = torch.randn(16, 16).half()
    buf = Buffer()
    with pytest.raises(LaunchError, match=r"fill_2d_tma_descriptor: .*block_shape"):
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), 16, 16, 16, 4, 2, buf.tma_desc_cpu_ptr())


def test_nv_tma_desc_type_is_listed():
    # Triton 3.1-3.3 code picks its CPU-buffer path with this test
    assert "nv_tma_desc_type" in dir(tl)


def test_sm90a_cubin_of_the_kernel():
    x = torch.randn(64, 64).half()
    a = create_2d_tma_descriptor(x.data_ptr(), 64, 64, 32, 64, 2)
    from tlxc.runtime.tma_legacy import resolve
    desc = resolve("scale_tiles", "in_desc", a)
    handle = scale_tiles.warmup(desc, desc, 64, 64, 1.0, BM=32, BN=64, grid=(2, 1), arch="sm_90a")
    assert handle.asm["cubin"]
    assert "__grid_constant__" in handle.asm["cuda"]             # the map travels as a kernel parameter
    assert "cp.async.bulk.tensor.2d" in handle.asm["cuda"]       # and is read by TMA copies


@pytest.mark.gpu
@pytest.mark.parametrize("flow", ["triton31", "triton30"])
def test_gpu_fill_2d_matches_torch(flow):
    """Real tensor maps: Triton 3.1-3.3's CPU buffer behind tma_desc_cpu_ptr(), or Triton 3.0's
    numpy buffer copied to the device."""
    g = _gen()
    m, n = 200, 136
    x = torch.randn(m, n, generator=g).half().cuda()
    out = torch.full((m, n), float("nan"), device="cuda").half()
    (_run_2d if flow == "triton31" else _run_2d_triton30)(x, out, 64, 64)
    torch.cuda.synchronize()
    ref = x.double() * 1.5
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).abs() / ref.abs().max()).max() < 2e-3


def test_warmup_takes_host_filled_descriptors_as_a_launch_does():
    """``kernel.warmup(...)`` (ahead-of-time compile) resolves the descriptors the grid function
    fills, as the launch does: the handle compiles for sm_90a with a TMA copy, and a buffer no
    fill wrote is refused naming the argument."""
    x = torch.empty(45, 88, dtype=torch.float16)
    out = torch.empty(45, 88, dtype=torch.float16)
    a, c = Buffer(), Buffer()

    def grid(meta):
        for buf, t in ((a, x), (c, out)):
            active.utils.fill_2d_tma_descriptor(t.data_ptr(), 45, 88, meta["BM"], meta["BN"], 2, buf.tma_desc_cpu_ptr())
        return (3, 3)
    handle = scale_tiles.warmup(a, c, 45, 88, 1.5, BM=16, BN=32, grid=grid)
    assert "cp.async.bulk.tensor" in handle.asm["cuda"]
    unfilled = Buffer()
    unfilled.bytes.zero_()        # (a fresh buffer may sit where an earlier test's filled one was, bytes and all)
    with pytest.raises(LaunchError, match="argument 'out_desc' of scale_tiles"):
        scale_tiles.warmup(a, unfilled, 45, 88, 1.5, BM=16, BN=32, grid=lambda meta: (1,))


# -- Triton 3.0: the fill writes a numpy buffer, the kernel takes a (device) copy of its bytes ---------
def _run_2d_triton30(x, out, BM, BN, buffer=None):
    import numpy as np
    m, n = x.shape
    da = np.empty(128, dtype=np.int8) if buffer is None else buffer()
    dc = np.empty(128, dtype=np.int8) if buffer is None else buffer()
    active.utils.fill_2d_tma_descriptor(x.data_ptr(), m, n, BM, BN, x.element_size(), da)
    active.utils.fill_2d_tma_descriptor(out.data_ptr(), m, n, BM, BN, out.element_size(), dc)
    def copy(d):           # Triton 3.0's torch.tensor(desc, device=...): a copy of the 128 bytes
        if isinstance(d, torch.Tensor):
            return d.clone().to(x.device)
        return torch.tensor(np.frombuffer(bytes(d), dtype=np.int8) if isinstance(d, bytearray) else d,
                            device=x.device)
    scale_tiles[(triton_cdiv(m, BM), triton_cdiv(n, BN))](copy(da), copy(dc), m, n, 1.5, BM=BM, BN=BN)


@pytest.mark.parametrize("buffer", [None, bytearray, lambda: torch.empty(128, dtype=torch.uint8)],
                         ids=["numpy", "bytearray", "cpu_tensor"])
def test_triton30_buffer_fill_and_copied_bytes_match_torch(buffer):
    g = _gen()
    m, n = 45, 88
    x = torch.randn(m, n, generator=g).half()
    out = torch.full((m, n), float("nan")).half()
    _run_2d_triton30(x, out, 16, 32, None if buffer is None else (lambda: buffer(128)) if buffer is bytearray
                     else buffer)
    ref = x.double() * 1.5
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).abs() / ref.abs().max()).max() < 2e-3


def test_triton30_each_cpu_fill_has_its_own_bytes():
    """Fills on CPU tensors write a marker with a serial number, so a copy names its own fill."""
    import numpy as np

    from tlxc.runtime import tma_legacy
    x, y = torch.zeros(16, 32, dtype=torch.float16), torch.zeros(32, 64, dtype=torch.float16)
    da, db = np.empty(128, dtype=np.int8), np.empty(128, dtype=np.int8)
    active.utils.fill_2d_tma_descriptor(x.data_ptr(), 16, 32, 16, 32, 2, da)
    active.utils.fill_2d_tma_descriptor(y.data_ptr(), 32, 64, 16, 32, 2, db)
    assert da.tobytes() != db.tobytes()
    assert tuple(tma_legacy.resolve_copy(torch.tensor(db)).shape) == (32, 64)
    other = torch.zeros(128, dtype=torch.int8)
    assert tma_legacy.resolve_copy(other) is other             # bytes of no fill: an ordinary pointer argument


def test_triton30_buffers_too_small_or_read_only_are_refused():
    import numpy as np
    x = torch.zeros(16, 32, dtype=torch.float16)
    with pytest.raises(LaunchError, match="fill_2d_tma_descriptor: the descriptor buffer holds 64 bytes"):
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), 16, 32, 16, 32, 2, np.empty(64, dtype=np.int8))
    frozen = np.empty(128, dtype=np.int8)
    frozen.flags.writeable = False
    with pytest.raises(LaunchError, match="writable C-contiguous numpy array"):
        active.utils.fill_2d_tma_descriptor(x.data_ptr(), 16, 32, 16, 32, 2, frozen)
