"""TMA stores write whole 16-byte chunks of the innermost dimension (measured on an H200,
2026-12-03, through host, tlxc-device and Triton maps alike), past a descriptor shape whose
inner size is not a 16-byte multiple.  A store through such a host descriptor is refused at
launch, with the same text on the interpreter and on the GPU path (whose launch key sets such
descriptors apart, so the check runs once per key); loads through it stay allowed."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.descriptors import TensorDescriptor
from tlxc.errors import LaunchError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.runtime import launch as L

NARROW = (r"argument 'dst' of sw_copy: TensorDescriptor shape\[1\] is 75 elements of f16, not a multiple of "
          r"16 bytes: TMA stores write whole 16-byte chunks of the innermost dimension")


@tlxc.jit
def sw_copy(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    dst.store([0, 64], src.load([0, 64]))


@tlxc.jit
def sw_load_only(src, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    tile = src.load([0, 64])
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(out_ptr + rows * BN + cols, tile)


def _pair(cols: int):
    x = torch.randn(64, 80, generator=torch.Generator().manual_seed(torch.seed() % 2**31)).half()
    y = torch.zeros(64, 80).half()
    box = [32, 64]
    return x, y, TensorDescriptor(x, [64, cols], [80, 1], box), TensorDescriptor(y, [64, cols], [80, 1], box)


def test_interpreter_refuses_a_store_through_a_narrow_view():
    _, y, src, dst = _pair(75)            # 75 f16 = 150 bytes
    with pytest.raises(LaunchError, match=NARROW):
        sw_copy[(1,)](src, dst, BM=32, BN=64)
    assert not y.any()


def test_interpreter_accepts_a_16_byte_multiple_and_writes_exactly_within_it():
    x, y, src, dst = _pair(72)           # 144 bytes
    sw_copy[(1,)](src, dst, BM=32, BN=64)
    assert torch.equal(y[:32, 64:72], x[:32, 64:72])
    assert not y[:, 72:].any() and not y[32:].any() and not y[:, :64].any()


def test_a_load_through_a_narrow_view_is_allowed():
    x, _, src, _ = _pair(75)
    out = torch.full((32, 64), float("nan")).half()
    sw_load_only[(1,)](src, out, BM=32, BN=64)
    assert torch.equal(out[:, :11], x[:32, 64:75]) and not out[:, 11:].any()   # zero padding past 75


def test_narrow_descriptors_have_a_launch_key_of_their_own():
    """The fast paths (Python and C) compare the type key: a narrow descriptor never hits a key
    that a 16-byte-multiple descriptor of the same box made, so the slow path checks it."""
    _, _, _, narrow = _pair(75)
    _, _, _, wide = _pair(72)
    assert narrow.ir_type() == wide.ir_type()
    assert narrow._type_key != wide._type_key
    assert _pair(75)[3]._type_key == narrow._type_key          # one key per (type, narrow): cached


def test_gpu_launch_check_refuses_what_the_compiled_kernel_stores_through():
    """``_check_tma_stores`` (the GPU slow path, before a key is kept) reads the compiled kernel's
    ``tma_store_args`` metadata, which the CUDA codegen computes from its TMA stores."""
    _, _, src, dst = _pair(75)
    spec = specialization_from_args(sw_copy, {"src": src, "dst": dst, "BM": 32, "BN": 64})
    metadata = compile_kernel(sw_copy, spec, arch="sm_90a", stages=("ir", "cuda")).metadata
    assert metadata["tma_store_args"] == [1]                   # dst, not src
    plan = SimpleNamespace(compiled=SimpleNamespace(metadata=metadata), runtime_index=[0, 1])
    with pytest.raises(LaunchError, match=NARROW):
        L._check_tma_stores(sw_copy, (src, dst, 32, 64), plan)
    _, _, src, dst = _pair(72)
    L._check_tma_stores(sw_copy, (src, dst, 32, 64), plan)
    spec = specialization_from_args(sw_load_only, {"src": src, "out_ptr": torch.zeros(1).half(), "BM": 32, "BN": 64})
    assert "tma_store_args" not in compile_kernel(sw_load_only, spec, arch="sm_90a", stages=("ir", "cuda")).metadata


@pytest.mark.gpu
def test_gpu_refuses_a_narrow_store_and_writes_exactly_a_16_byte_multiple():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    x, y = (t.cuda() for t in _pair(72)[:2])
    for cols in (75, 72, 75):           # refused, launched, refused again (a kept key would skip the check)
        src = TensorDescriptor(x, [64, cols], [80, 1], [32, 64])
        dst = TensorDescriptor(y, [64, cols], [80, 1], [32, 64])
        if cols == 75:
            with pytest.raises(LaunchError, match=NARROW):
                sw_copy[(1,)](src, dst, BM=32, BN=64)
        else:
            sw_copy[(1,)](src, dst, BM=32, BN=64)
    torch.cuda.synchronize()
    assert torch.equal(y[:32, 64:72], x[:32, 64:72])
    assert not y[:, 72:].any() and not y[32:].any() and not y[:, :64].any()


def test_ops_matmul_stores_a_narrow_output_view_by_pointer():
    """ops.matmul's output takes the TMA-store kernel only when its rows are 16-byte multiples:
    a view of 75 f16 columns of rows of 80 goes to a pointer-store kernel instead of a refusal."""
    import importlib
    mm = importlib.import_module("tlxc.ops.matmul")
    a, b = torch.randn(64, 32).half(), torch.randn(32, 75).half()
    assert not mm._problem(a, b, torch.zeros(64, 80).half()[:, :75]).tma_c
    assert mm._problem(a, b[:, :72], torch.zeros(64, 80).half()[:, :72]).tma_c
