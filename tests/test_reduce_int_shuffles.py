"""Integer max/min reductions across lanes: the select that combines a lane's value with its
partner's names the partner twice, so a ``__shfl_xor_sync`` written there ran twice, the second
time only in the lanes whose comparison picked it -- a divergent full-mask shuffle, which hangs a
warp on the GPU (it did: the grouped GEMM's ``tl.max`` of int32 tile counts over 64 experts).  The
shuffle is now bound once per step.  CUDA text on the CPU; on the GPU, int32/int64 maxima, minima and
argmax against torch over layouts whose reductions cross lanes and warps."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl


@tlxc.jit
def int_extremes(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """Row maxima and minima of an R x C tile, the maximum and minimum of the whole tile, and the
    row argmax: out = [max_1 (R), min_1 (R), max, min, argmax_1 (R)]."""
    rows = tl.arange(0, R)[:, None]
    cols = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + rows * C + cols)
    tl.store(out_ptr + tl.arange(0, R), tl.max(x, 1))
    tl.store(out_ptr + R + tl.arange(0, R), tl.min(x, 1))
    tl.store(out_ptr + 2 * R, tl.max(tl.max(x, 1), 0))
    tl.store(out_ptr + 2 * R + 1, tl.min(tl.min(x, 1), 0))
    tl.store(out_ptr + 2 * R + 2 + tl.arange(0, R), tl.argmax(x, 1).to(out_ptr.dtype.element_ty))


SHAPES = [(1, 64), (4, 64), (16, 32), (2, 1024)]


@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("R,C", SHAPES)
def test_no_shuffle_sits_inside_a_select(dtype, R, C):
    cuda = int_extremes.compile(f"x_ptr=*{dtype}, out_ptr=*{dtype}", {"R": R, "C": C}, arch="sm_90a", num_warps=4,
                                stages=("cuda",)).asm["cuda"]
    assert "__shfl_xor_sync" in cuda
    for line in cuda.splitlines():
        if "__shfl_xor_sync" in line and "?" in line:
            # the select may only read a bound value: no shuffle between the '?' and the ';'
            assert not re.search(r"\?[^;]*__shfl_xor_sync", line), line


def _check(x, device):
    R, C = x.shape
    out = torch.full((3 * R + 2,), -7, device=device, dtype=x.dtype)
    int_extremes[(1,)](x, out, R=R, C=C)
    ref = torch.cat([x.amax(1), x.amin(1), x.amax().reshape(1), x.amin().reshape(1), x.argmax(1).to(x.dtype)])
    assert torch.equal(out, ref)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int_extremes_on_the_interpreter(dtype):
    x = torch.randint(-(2 ** 30), 2 ** 30, (16, 32), generator=torch.Generator().manual_seed(3)).to(dtype)
    _check(x, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("R,C", SHAPES)
def test_int_extremes_on_the_gpu(dtype, R, C):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator(device="cuda").manual_seed(R * C)
    _check(torch.randint(-(2 ** 30), 2 ** 30, (R, C), device="cuda", generator=g, dtype=torch.int64).to(dtype), "cuda")
