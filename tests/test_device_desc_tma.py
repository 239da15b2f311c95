"""tlx.async_descriptor_load / _store on in-kernel descriptors (tl.make_tensor_descriptor): TMA
through the tensor map the kernel encodes on sm_90a / sm_100a; without one (sm_80) the task
moves the box itself and completes the box's bytes on the barrier (mbarrier.complete_tx).  Interpreter vs torch,
the checker, sm_90a and sm_100a cubins; none of the sm_100a code has run on Blackwell."""
from __future__ import annotations

import kernels_device_desc_tma as K
import pytest
import torch

from tlxc.check import ERROR
from tlxc.compiler import check_function, compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter import interpret

SIG = parse_signature("x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32")


@pytest.mark.parametrize(("m", "n"), [(64, 64), (100, 72)])       # a tile multiple, and ragged edges
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_box_round_trip_on_the_interpreter(m, n, arch):
    x = torch.randn(m, n)
    y = torch.full((m, n), float("nan"))
    grid = (-(-m // 32), -(-n // 32))
    interpret(K.desc_copy_scaled, grid, (x, y, m, n), {"BM": 32, "BN": 32}, arch=arch)
    torch.testing.assert_close(y.double(), 2 * x.double(), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_checker_and_cubin(arch, monkeypatch):
    monkeypatch.delenv("TLXC_DEVICE_TENSORMAPS", raising=False)     # (the default: device maps)
    spec = specialization_from_types(K.desc_copy_scaled, SIG, {"BM": 32, "BN": 32})
    assert not [f for f in check_function(K.desc_copy_scaled, spec, arch=arch) if f.severity == ERROR]
    compiled = compile_kernel(K.desc_copy_scaled, spec, arch=arch, stages=("ir", "cuda", "ptx", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    # the tensor map is encoded in the kernel and the box is a TMA copy (codegen_nvptx/rules_tensormap.py)
    assert "tensormap.replace.tile.global_address" in compiled.asm["ptx"]
    assert "cp.async.bulk.tensor" in compiled.asm["ptx"]
    assert "mbarrier.complete_tx" not in compiled.asm["ptx"]


def test_unsupported_arguments_are_located_errors():
    import tlxc
    import tlxc.language as tl
    from tlxc.language import tlx

    @tlxc.kernel
    def bad(x_ptr, M, N):
        d = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[32, 32])
        buf = tlx.local_alloc((32, 32), tl.float32, 1)
        bar = tlx.alloc_barriers(num_barriers=1)
        tlx.barrier_expect_bytes(bar[0], 4096)
        tlx.async_descriptor_load(d, buf[0], [0, 0], bar[0], eviction_policy="evict_first")

    spec = specialization_from_types(bad, parse_signature("x_ptr=*fp32,M=i32,N=i32"), {})
    # sm_80 encodes no tensor map: the task copies the box itself, without TMA's options
    with pytest.raises(TlxcError, match=r"test_device_desc_tma.py:\d+.*'eviction_policy' is not supported on an "
                                        r"in-kernel descriptor without a tensor map"):
        compile_kernel(bad, spec, arch="sm_80", stages=("ir",))
