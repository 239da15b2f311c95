"""The CUDA emulation's fp8 conversion (``cvt.rn.satfinite``): the nearest code, ties to even, and at or past
the largest finite value that value -- infinities and floats so large that every code is equally far
in float32 (2**31, 1e38) included.  It once took the even code below the largest there (49152 for
e5m2), where the interpreter and the GPU give 57344; found by comparing every interpreted launch of
the tests with the emulation of its CUDA text."""
from __future__ import annotations

import kernels_interp as K
import pytest
import torch

import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu

pytestmark = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")


@pytest.mark.parametrize("dtype,torch_dtype,top", [(tl.float8e5, torch.float8_e5m2, 57344.0),
                                                   (tl.float8e4nv, torch.float8_e4m3fn, 448.0)])
def test_the_emulated_conversion_saturates_as_the_gpu(dtype, torch_dtype, top):
    special = [top, top * 1.5, top * 4, 2.0 ** 31, 1e38, float("inf")]
    x = torch.tensor(special + [-v for v in special] + [0.0, 1.0, 0.0625 * 1.0625, float("nan")])
    x = torch.cat([x, torch.randn(200, generator=torch.Generator().manual_seed(3)) * 50])
    out = torch.zeros(x.numel(), dtype=torch_dtype)
    h = K.cast_kernel.warmup(x, out, x.numel(), DTYPE=dtype, BLOCK=256, grid=(1,))
    emu.build(h.asm["cuda"]).run({"x_ptr": x, "out_ptr": out, "n": x.numel()}, grid=(1, 1, 1), threads=128)
    got = out.float()
    n = len(special)
    assert got[:n].tolist() == [top] * n and got[n:2 * n].tolist() == [-top] * n
    assert torch.isnan(got[2 * n + 3])
    finite = torch.cat([x[2 * n:2 * n + 3], x[2 * n + 4:]])
    ref = finite.clamp(-top, top).to(torch_dtype)          # in range: torch rounds to nearest even
    assert torch.equal(torch.cat([out[2 * n:2 * n + 3], out[2 * n + 4:]]).view(torch.uint8), ref.view(torch.uint8))
