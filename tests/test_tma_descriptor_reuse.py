"""TensorDescriptor's per-geometry caches (descriptors.py): TLX's wrappers build three
placeholder descriptors ([1, 1] boxes) on every call and an autotune pre_hook then assigns
their boxes. The placeholder's legality checks run once per geometry (``_KNOWN``) and a
box assignment to an already-checked geometry only swaps the box-derived fields
(``TensorDescriptor.__setattr__``). Every refusal of the uncached path must stay."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tlxc
from tlxc import descriptors as tma
from tlxc.errors import LaunchError

TD = tlxc.TensorDescriptor


def _fresh(t, box):
    return TD(t, shape=list(t.shape), strides=list(t.stride()), block_shape=box)


def test_reboxed_placeholder_equals_a_descriptor_built_with_the_box():
    t = torch.randn(256, 192, dtype=torch.float16)
    want = _fresh(t, [64, 64])
    for _ in range(3):                      # the first pass fills the caches, the others use them
        d = _fresh(t, [1, 1])
        d.block_shape = [64, 64]
        assert d.ir_type() == want.ir_type() and d.swizzle == want.swizzle == 128
        assert d.block_shape == (64, 64)
        d.block_shape = [32, 32]            # another box: its own swizzle and type
        assert d.swizzle == 64 and d.ir_type() == _fresh(t, [32, 32]).ir_type()


def test_cached_placeholder_geometry_still_refuses_bad_boxes():
    t = torch.randn(128, 128, dtype=torch.float16)
    for _ in range(2):
        d = _fresh(t, [1, 1])
        with pytest.raises(LaunchError, match="block_shape"):
            d.block_shape = [64, 300]       # over 256 elements and no multiple of 256
        assert d.block_shape == (1, 1)      # a refused assignment leaves the descriptor as it was
        with pytest.raises(LaunchError, match="one entry per dimension"):
            d.block_shape = [64]
        with pytest.raises(LaunchError, match="placeholder"):
            d.ir_type()                     # the placeholder box is refused when used


def test_placeholder_cache_keys_the_alignment_and_the_storage():
    t = torch.randn(64 * 64 + 8, dtype=torch.float16)
    ok = t[:64 * 64].view(64, 64)
    _fresh(ok, [1, 1])
    _fresh(ok, [1, 1])                      # cached
    shifted = t[1:1 + 64 * 64].view(64, 64)  # 2 bytes past a 16-byte boundary
    with pytest.raises(LaunchError, match="16-byte aligned"):
        _fresh(shifted, [1, 1])
    small = torch.randn(32, 64, dtype=torch.float16)
    with pytest.raises(LaunchError, match="storage"):
        TD(small, shape=[64, 64], strides=[64, 1], block_shape=[1, 1])   # same geometry key but less storage


def test_ints_fast_path_keeps_the_slow_paths_refusals():
    assert tma._ints([64, 32]) == (64, 32) and tma._ints((1,)) == (1,)
    assert tma._ints(torch.Size([8, 8])) == (8, 8)
    with pytest.raises(LaunchError):
        tma._ints([64.0, 32])
    assert tma._ints([True, 2]) == (1, 2)       # bool is an int to operator.index, as before
