"""The host path of TLX's GEMM wrappers (issue 17): three ``TensorDescriptor``s with a
placeholder box built on every call, an autotuner with a cached choice whose config
``pre_hook`` assigns the boxes, a launch with keyword constexprs.  A descriptor of a
geometry seen before skips the rules (``_KNOWN``) but still reads its own tensor; the
autotuner hands its pre_hook the launch's arguments, keywords and config values on every
launch.  The cost is measured by ``bench/tlx_wrapper_host_probe.py``."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc import descriptors as tma
from tlxc.errors import LaunchError

TD = tlxc.TensorDescriptor


def test_a_known_geometry_is_not_rechecked_but_reads_its_own_tensor(monkeypatch):
    first = torch.zeros(96, 64, dtype=torch.float16)
    TD(first, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])       # the rules run once: remembered
    described = []
    plain = tma.TensorDescriptor._describe
    monkeypatch.setattr(tma.TensorDescriptor, "_describe", lambda self: (described.append(1), plain(self)))
    other = torch.zeros(96, 64, dtype=torch.float16)                     # another tensor, same geometry
    d = TD(other, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    assert described == [] and d.base is other and d.dtype.name == "f16" and d.device_index == -1
    assert "swizzle" not in d.__dict__                                   # still a placeholder box
    d.block_shape = [32, 64]                                             # a new box: checked (describe) ...
    assert described == [1] and d.swizzle == 128
    e = TD(other, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    e.block_shape = [32, 64]                                             # ... once
    assert described == [1] and e.ir_type() == d.ir_type()
    # the encoded map is keyed on the geometry's number: one per geometry, another for another box
    assert e._gid == d._gid
    e.__dict__["_last_address"] = 12345                                  # (as after a launch's encode)
    e.block_shape = (32, 64)                                             # the box it has: the map stays
    assert e._last_address == 12345
    e.block_shape = [16, 64]
    assert e._last_address is None and e._gid != d._gid and e.swizzle == 128
    # what the geometry does not hold is still read from each tensor: the storage and the dtype
    described.clear()
    with pytest.raises(LaunchError, match="storage holds"):
        TD(torch.zeros(95, 64, dtype=torch.float16), shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    f = TD(torch.zeros(96, 64, dtype=torch.bfloat16), shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    assert f.dtype.name == "bf16" and described == [1, 1]


def _boxes(nargs):
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    SEEN.append(sorted(k for k in nargs if not k.endswith("_desc")))


SEEN: list = []


@tlxc.autotune(configs=[tlxc.Config({"BM": 32, "BN": 32, "BK": 32}, num_warps=4, pre_hook=_boxes)], key=["M"])
@tlxc.jit
def double_tiles(a_desc, c_desc, M, SCALE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    x = a_desc.load([pid * BM, 0])
    c_desc.store([pid * BM, 0], (x.to(tl.float32) * SCALE).to(tlx.dtype_of(c_desc)))


def test_the_wrapper_pattern_relaunches_with_fresh_placeholders(monkeypatch):
    monkeypatch.setenv("TLXC_INTERPRET", "1")
    SEEN.clear()
    for call in range(3):
        M = 64 + 32 * (call % 2)            # two tuning keys in turn
        a = torch.randn(M, 32, dtype=torch.float16)
        c = torch.full((M, 32), float("nan"), dtype=torch.float16)
        da = TD(a, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        dc = TD(c, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        double_tiles[lambda meta, M=M: (tlxc.cdiv(M, meta["BM"]),)](da, dc, M, SCALE=2.0)
        torch.testing.assert_close(c.float(), a.float() * 2.0, rtol=1e-3, atol=1e-3)
        assert da.block_shape == (32, 32) and dc.swizzle == 64
    # every launch: the positional arguments, the keyword and the config's values and options
    assert SEEN == [["BK", "BM", "BN", "M", "SCALE", "num_ctas", "num_stages", "num_warps"]] * 3
