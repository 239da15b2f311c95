"""TLX's older cluster-launch-control spelling (``clc_create_scheduler`` /
``clc_fetch_next_worker(scheduler, phase)``, the stored blackwell-gemm-clc.py tutorial's):
accepted with a DeprecationWarning naming the current calls, and the same kernel as the
current ``clc_create_context(1, n)`` + ``clc_producer(ctx, phase ^ 1, multi_ctas=False)`` +
``clc_consumer(ctx, phase, multi_ctas=False)`` (identical IR), on the interpreter (each tile
done once, by the first program) and for sm_100a (ptxas).  Not run on Blackwell hardware."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter import interpret
from tlxc.language import tlx

SIG = parse_signature("x_ptr=*fp32,y_ptr=*fp32,owner_ptr=*i32,n=i32")


@tlxc.kernel
def older(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    phase = 0
    scheduler = tlx.clc_create_scheduler(num_stages=1)  # the older context
    while tile != -1:
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=offs < n)
        tl.store(owner_ptr + tile, tl.program_id(0))
        tile = tlx.clc_fetch_next_worker(scheduler, phase)  # the older fetch
        phase ^= 1


@tlxc.kernel
def current(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    phase = 0
    ctx = tlx.clc_create_context(1, 1)
    while tile != -1:
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=offs < n)
        tl.store(owner_ptr + tile, tl.program_id(0))
        tlx.clc_producer(ctx, phase ^ 1, multi_ctas=False)
        tile = tlx.clc_consumer(ctx, phase, multi_ctas=False)
        phase ^= 1


@tlxc.kernel
def older_misused(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    ctx = tlx.clc_create_context(2, 1)
    tlx.clc_fetch_next_worker(ctx, 0)  # two consumers


def _line(marker: str) -> int:
    return next(n for n, s in enumerate(open(__file__).read().splitlines(), 1) if s.rstrip().endswith(marker))


def _ir(kernel, cluster=None, stages=("ir",)):
    spec = specialization_from_types(kernel, SIG, {"BLOCK": 64})
    return compile_kernel(kernel, spec, arch="sm_100a", cluster=cluster, stages=stages)


def test_warns_naming_the_current_calls_at_their_lines():
    with pytest.warns(DeprecationWarning) as record:
        _ir(older)
    found = {(w.lineno, str(w.message).split(" is ")[0]) for w in record}
    assert (_line("# the older context"), "tlx.clc_create_scheduler(num_stages)") in found
    assert (_line("# the older fetch"), "tlx.clc_fetch_next_worker(scheduler, phase)") in found
    text = " ".join(str(w.message) for w in record)
    assert "tlx.clc_create_context(1, num_stages)" in text
    assert "tlx.clc_producer(ctx, phase ^ 1, multi_ctas=False) + tlx.clc_consumer(ctx, phase, multi_ctas=False)" in text


def test_same_ir_as_the_current_calls():
    def ops(kernel):
        with pytest.warns(DeprecationWarning) if kernel is older else _no_warning():
            module = _ir(kernel).asm["ir"]
        return [line.split("=", 1)[-1].split("(")[0].strip() for line in module.splitlines() if "tlx." in line]
    assert ops(older) == ops(current)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("seed", [None, 3])
def test_interpreter_first_program_takes_every_tile(seed):
    n, block = 1000, 64
    tiles = -(-n // block)
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    owner = torch.full((tiles,), -7, dtype=torch.int32)
    interpret(older, (tiles,), (x, y, owner, n), {"BLOCK": block}, seed=seed, arch="sm_100a")
    torch.testing.assert_close(y.double(), 2 * x.double() + 1, rtol=1e-6, atol=1e-6)
    assert owner.tolist() == [0] * tiles


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sm100a_cubin():
    compiled = _ir(older, stages=("ir", "cuda", "ptx", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "clusterlaunchcontrol.try_cancel.async" in compiled.asm["ptx"]
    assert "multicast" not in compiled.asm["ptx"]


def test_fetch_needs_a_one_consumer_context():
    with pytest.raises(TlxcError) as info:
        _ir(older_misused)
    assert "this one has num_consumers=2" in str(info.value) and info.value.loc.line == _line("# two consumers")


@tlxc.kernel
def print_by_thread_0(x_ptr, n):
    """The stored tutorial prints the tile id from thread 0 only (a scalar under a thread branch)."""
    if tlx.thread_id(axis=0) == 0:
        tl.device_print("tile", tl.program_id(0) * 10 + n)


def test_scalar_print_under_a_thread_branch_prints_once_per_thread_that_runs_it(capfd):
    interpret(print_by_thread_0, (3,), (torch.zeros(1), 5))
    lines = [ln for ln in capfd.readouterr().out.splitlines() if "tile" in ln]
    assert [ln.split("tile")[-1].strip(": ") for ln in lines] == ["5", "15", "25"], lines


@tlxc.kernel
def older_producer_wait(x_ptr, y_ptr, owner_ptr, n, BLOCK: tl.constexpr):
    ctx = tlx.clc_create_context(1, 1)
    tlx.clc_producer_wait(ctx, 0, 1, True)  # producer_wait


def test_older_calls_without_an_exact_mapping_say_why_at_their_line():
    with pytest.raises(TlxcError) as info:
        _ir(older_producer_wait)
    assert "tlx.clc_producer_wait is not supported: an older TLX cluster-launch-control call" in str(info.value)
    assert "older argument orders" in str(info.value) and info.value.loc.line == _line("# producer_wait")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_launch_cluster_is_an_accepted_no_op_launch_option(monkeypatch):
    """The stored tutorial launches with launch_cluster=True (every sm_90+ launch runs in clusters)."""
    monkeypatch.setenv("TLXC_INTERPRET_ARCH", "sm_100a")
    n = 200
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    owner = torch.full((4,), -7, dtype=torch.int32)
    tlxc.interpret(older)[(4,)](x, y, owner, n, BLOCK=64, launch_cluster=True)
    torch.testing.assert_close(y.double(), 2 * x.double() + 1, rtol=1e-6, atol=1e-6)
    with pytest.raises(TlxcError, match="launch_cluster"):
        tlxc.interpret(older)[(4,)](x, y, owner, n, BLOCK=64, launch_cluster="yes")
