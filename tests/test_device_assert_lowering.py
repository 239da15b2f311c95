"""``tl.device_assert`` on a tensor: one report per thread (the message names the program, not the
element), so one ``printf`` call site whatever the thread's register count; before, each unrolled
register had its own (the decode combine kernel: 5 calls and 38 registers, now 3 and 32).  The
CUDA emulation runs the text: a failing element in any register traps, a clean run does not."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu


@tlxc.jit
def bump_in_range(x_ptr, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert((x >= 0) & (x < 100), "x out of range")
    tl.store(x_ptr + offs, x + 1, mask=offs < n)


def _text(x):
    return bump_in_range.warmup(x, x.numel(), B=512, grid=(1,)).asm["cuda"]


def test_one_call_site_for_all_of_a_threads_registers():
    text = _text(torch.zeros(512, dtype=torch.int32))
    assert text.count("printf(") == 1 and "assert_failed |= !" in text


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("bad_index", [None, 0, 131, 511])
def test_any_register_traps_on_the_emulation(bad_index):
    x = torch.arange(512, dtype=torch.int32) % 100
    if bad_index is not None:
        x[bad_index] = 100
    module = emu.build(_text(x))
    if bad_index is None:
        module.run({"x_ptr": x, "n": 512}, grid=(1, 1, 1), threads=128)
        assert torch.equal(x, torch.arange(512, dtype=torch.int32) % 100 + 1)
        return
    with pytest.raises(emu.EmulationError, match="a device assertion failed"):
        module.run({"x_ptr": x, "n": 512}, grid=(1, 1, 1), threads=128)
