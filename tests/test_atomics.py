"""Triton's atomics: every operation on the interpreter against a torch/numpy
reference, ``sem``/``scope`` validation with located errors, the PTX each
(sem, scope) lowers to (sm_90a cubin, no GPU needed), and ``tl.debug_barrier``.

The ``gpu``-marked tests at the end run the same kernels under contention (many
programs on one address) for every sem/scope on the device.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.interpreter import interpret
from tlxc.language import tlx

SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("gpu", "cta", "sys")
HERE = os.path.basename(__file__)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# -- kernels --------------------------------------------------------------------------------------

@tlxc.jit
def rmw_kernel(x_ptr, out_ptr, old_ptr, n, BINS: tl.constexpr, OP: tl.constexpr, SEM: tl.constexpr,
               SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    """Every element of x folds into out[i % BINS] (many programs on few addresses);
    old_ptr receives the values each atomic saw."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    target = out_ptr + offs % BINS
    if OP == "add":
        old = tl.atomic_add(target, x, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(target, x, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(target, x, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(target, x, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(target, x, mask=mask, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(target, x, mask=mask, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(target, x, mask=mask, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=mask)


@tlxc.jit
def ticket_kernel(counter_ptr, tickets_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """A scalar atomic: one ticket per program, and every thread sees the same one."""
    ticket = tl.atomic_add(counter_ptr, 1, sem=SEM, scope=SCOPE)
    tl.store(tickets_ptr + tl.program_id(0), ticket)


@tlxc.jit
def small_tile_kernel(out_ptr, old_ptr, BLOCK: tl.constexpr):
    """A tile smaller than the program's threads: each element must be added once."""
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_add(out_ptr + offs, offs + 1)
    tl.store(old_ptr + tl.program_id(0) * BLOCK + offs, old)


@tlxc.jit
def lock_kernel(lock_ptr, count_ptr, log_ptr, SEM_LOCK: tl.constexpr, SEM_UNLOCK: tl.constexpr):
    """A spin lock around a plain (non-atomic) read-modify-write: with acquire /
    release the critical sections cannot overlap, so every increment survives."""
    while tl.atomic_cas(lock_ptr, 0, 1, sem=SEM_LOCK) == 1:
        pass
    count = tl.load(count_ptr, volatile=True)
    tl.store(log_ptr + tl.program_id(0), count)
    tl.store(count_ptr, count + 1)
    tl.atomic_xchg(lock_ptr, 0, sem=SEM_UNLOCK)


@tlxc.jit
def cas_kernel(ptr, cmp_ptr, val_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_cas(ptr + offs, tl.load(cmp_ptr + offs), tl.load(val_ptr + offs))
    tl.store(old_ptr + offs, old)


@tlxc.jit
def barrier_kernel(x_ptr, scratch_ptr, out_ptr, BLOCK: tl.constexpr):
    """Threads read what other threads wrote: the barrier orders them."""
    offs = tl.arange(0, BLOCK)
    tl.store(scratch_ptr + offs, tl.load(x_ptr + offs))
    tl.debug_barrier()
    tl.store(out_ptr + offs, tl.load(scratch_ptr + (BLOCK - 1 - offs)))


def run_rmw(op, x, out, bins, sem="acq_rel", scope="gpu", block=64, runner=interpret):
    n = x.numel()
    old = torch.zeros_like(x)
    meta = {"BINS": bins, "OP": op, "SEM": sem, "SCOPE": scope, "BLOCK": block}
    if runner is interpret:
        interpret(rmw_kernel, (cdiv(n, block),), (x, out, old, n), meta)
    else:
        rmw_kernel[(cdiv(n, block),)](x, out, old, n, **meta)
        torch.cuda.synchronize()
    return old


def fold(op, x, init, bins):
    """The reference: init[b] folded with every x[i] with i % bins == b."""
    values = x.cpu().numpy()
    out = init.cpu().numpy().copy()
    ufunc = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    for b in range(bins):
        out[b] = ufunc.reduce(np.concatenate([out[b:b + 1], values[b::bins]]))
    return torch.from_numpy(out)


# -- the interpreter ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint32])
@pytest.mark.parametrize("op", ["add", "max", "min", "and", "or", "xor"])
def test_integer_atomics_fold_every_element(op, dtype, gen):
    n, bins = 333, 5
    high = 2**31 - 1 if dtype != torch.uint32 else 2**32 - 1
    low = 0 if dtype == torch.uint32 or op == "add" else -2**31
    x = torch.randint(low, high, (n,), generator=gen, dtype=torch.int64)
    if op == "add":
        x = x % 1000
    x = x.to(dtype)
    init = torch.randint(0, 1000, (bins,), generator=gen, dtype=torch.int64).to(dtype)
    out = init.clone()
    old = run_rmw(op, x, out, bins)
    assert torch.equal(out, fold(op, x, init, bins))
    # the programs ran in order: each old value is the fold of everything before it
    first = old[:bins]
    assert torch.equal(first, init)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_min_max(op, dtype, gen):
    n, bins = 200, 3
    x = torch.randn(n, generator=gen, dtype=dtype)
    init = torch.randn(bins, generator=gen, dtype=dtype)
    out = init.clone()
    run_rmw(op, x, out, bins)
    assert torch.equal(out, fold(op, x, init, bins))


def test_float_max_keeps_the_gpu_answers_on_signed_zeros_and_nan():
    """Triton's integer route: +0 beats -0 in max, -0 beats +0 in min, a NaN sticks."""
    for op, init, values, expected in (("max", -0.0, [0.0], 0.0), ("min", 0.0, [-0.0], -0.0),
                                       ("max", 1.0, [float("nan"), 5.0, -3.0], float("nan"))):
        out = torch.tensor([init])
        run_rmw(op, torch.tensor(values), out, 1)
        assert out.item() == expected or (np.isnan(expected) and np.isnan(out.item()))
        assert np.signbit(out.item()) == np.signbit(expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_float_add(dtype, gen):
    n, bins = 256, 4
    x = torch.randn(n, generator=gen).to(dtype)
    out = torch.zeros(bins, dtype=dtype)
    run_rmw("add", x, out, bins)
    ref = x.double().reshape(-1, bins).sum(0)
    tol = {torch.float16: 2e-2, torch.bfloat16: 1e-1}.get(dtype, 1e-5)
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol * 4)


def test_xchg_returns_the_previous_values(gen):
    x = torch.randn(100, generator=gen)
    out = torch.full((100,), 7.0)
    old = run_rmw("xchg", x, out, 100)         # one writer per address
    assert torch.equal(out, x) and (old == 7.0).all()


def test_masked_lanes_touch_nothing_and_return_zero(gen):
    n = 37                                     # the tile is 64: lanes 37..63 are masked off
    x = torch.randint(1, 9, (n,), generator=gen, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    old = run_rmw("add", x, out, 64)
    assert torch.equal(out[:n], x) and (out[n:] == 0).all() and (old == 0).all()


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_scalar_atomic_returns_each_program_a_distinct_ticket(order):
    counter = torch.zeros(1, dtype=torch.int32)
    tickets = torch.full((40,), -1, dtype=torch.int32)
    interpret(ticket_kernel, (40,), (counter, tickets), {"SEM": "relaxed", "SCOPE": "gpu"}, order=order, seed=5)
    assert counter.item() == 40 and sorted(tickets.tolist()) == list(range(40))


def test_spin_lock_with_cas(gen):
    lock, count = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    log = torch.full((16,), -1, dtype=torch.int32)
    interpret(lock_kernel, (16,), (lock, count, log), {"SEM_LOCK": "acquire", "SEM_UNLOCK": "release"},
              order="shuffled", seed=2)
    assert count.item() == 16 and lock.item() == 0 and sorted(log.tolist()) == list(range(16))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.int64, torch.int16, torch.float16])
def test_cas_swaps_where_memory_equals_cmp(dtype, gen):
    block = 32
    memory = torch.randint(0, 4, (block,), generator=gen).to(dtype)
    cmp = torch.randint(0, 4, (block,), generator=gen).to(dtype)
    val = torch.randint(10, 20, (block,), generator=gen).to(dtype)
    before = memory.clone()
    old = torch.zeros_like(memory)
    interpret(cas_kernel, (1,), (memory, cmp, val, old), {"BLOCK": block})
    assert torch.equal(old, before)
    assert torch.equal(memory, torch.where(before == cmp, val, before))


def test_cas_compares_bits_not_values():
    """atom.cas compares bit patterns: -0.0 is not 0.0, and a NaN equals the same NaN."""
    memory = torch.tensor([-0.0, float("nan")] * 16)
    cmp = torch.tensor([0.0, float("nan")] * 16)
    old = torch.zeros_like(memory)
    interpret(cas_kernel, (1,), (memory, cmp, torch.full((32,), 3.0), old), {"BLOCK": 32})
    assert torch.equal(memory[0::2], torch.full((16,), -0.0)) and np.signbit(memory[0].item())
    assert (memory[1::2] == 3.0).all()


def test_debug_barrier_on_the_interpreter(gen):
    x = torch.randn(64, generator=gen)
    scratch, out = torch.full((64,), float("nan")), torch.full((64,), float("nan"))
    interpret(barrier_kernel, (1,), (x, scratch, out), {"BLOCK": 64})
    assert torch.equal(out, x.flip(0))


# -- errors -----------------------------------------------------------------------------------

@tlxc.jit
def bad_sem_kernel(p, SEM: tl.constexpr, SCOPE: tl.constexpr):
    tl.atomic_add(p, 1.0, sem=SEM, scope=SCOPE)


@tlxc.jit
def bad_op_kernel(p, OP: tl.constexpr):
    if OP == "and":
        tl.atomic_and(p, 1)
    elif OP == "max":
        tl.atomic_max(p + tl.arange(0, 16), 1)
    elif OP == "shape":
        tl.atomic_add(p, tl.arange(0, 16))
    elif OP == "cas":
        tl.atomic_cas(p, 0, 1)
    else:
        tl.atomic_add(p, 1)


def _error(kernel, signature, **constexprs) -> str:
    with pytest.raises(CompilationError) as info:
        kernel.compile(signature, constexprs, stages=("ir",))
    return str(info.value)


@pytest.mark.parametrize("sem, scope, named", [("bogus", "gpu", "'sem'"), ("acq_rel", "bogus", "'scope'"),
                                               ("ACQ_REL", "gpu", "'sem'"), (3, "gpu", "'sem'"),
                                               ("relaxed", "cluster", "'scope'")])
def test_bad_sem_or_scope_is_a_located_error(sem, scope, named):
    text = _error(bad_sem_kernel, "p=*fp32", SEM=sem, SCOPE=scope)
    line = bad_sem_kernel.fn.__code__.co_firstlineno + 2
    assert f"{HERE}:{line}:" in text and named in text and "must be one of" in text


@pytest.mark.parametrize("op, signature, expected", [
    ("and", "p=*fp32", "atomic_and needs integer elements, got f32"),
    ("max", "p=*fp16", "16-bit floats support only atomic_add"),
    ("add", "p=*i16", "atomic_add does not support i16"),
    ("add", "p=*i8", "atomic_add does not support i8"),
    ("cas", "p=*i8", "atomic_cas needs 16-, 32- or 64-bit elements, got i8"),
    ("shape", "p=*i32", "'val' of shape [16] does not match a scalar pointer"),
])
def test_unsupported_element_types_and_shapes_are_located_errors(op, signature, expected):
    text = _error(bad_op_kernel, signature, OP=op)
    assert expected in text and HERE in text


# -- the PTX of each (sem, scope), sm_90a cubin without a GPU -----------------------------------

@pytest.mark.parametrize("sem", SEMS)
@pytest.mark.parametrize("scope", SCOPES)
def test_sem_and_scope_reach_the_ptx(sem, scope):
    compiled = rmw_kernel.compile("x_ptr=*fp32, out_ptr=*fp32, old_ptr=*fp32, n=i32",
                                  {"BINS": 4, "OP": "add", "SEM": sem, "SCOPE": scope, "BLOCK": 128},
                                  arch="sm_90a", stages=("cuda", "ptx", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert f"atom.{sem}.{scope}.global.add.f32" in compiled.asm["ptx"]


def test_the_default_is_acq_rel_gpu():
    compiled = bad_op_kernel.compile("p=*i32", {"OP": "add"}, arch="sm_90a", stages=("ir", "cuda", "ptx"))
    assert 'scope = "gpu", sem = "acq_rel"' in compiled.asm["ir"]
    assert "atom.acq_rel.gpu.global.add.s32" in compiled.asm["ptx"]


@pytest.mark.parametrize("op, signature, instructions", [
    ("max", "*fp32", ("atom.acq_rel.gpu.global.max.s32", "atom.acq_rel.gpu.global.min.u32")),
    ("min", "*fp64", ("atom.acq_rel.gpu.global.min.s64", "atom.acq_rel.gpu.global.max.u64")),
    ("max", "*u32", ("atom.acq_rel.gpu.global.max.u32",)),
    ("min", "*i64", ("atom.acq_rel.gpu.global.min.s64",)),
    ("and", "*i64", ("atom.acq_rel.gpu.global.and.b64",)),
    ("xor", "*u32", ("atom.acq_rel.gpu.global.xor.b32",)),
    ("xchg", "*fp32", ("atom.acq_rel.gpu.global.exch.b32",)),
    ("add", "*bf16", ("atom.acq_rel.gpu.global.add.noftz.bf16",)),
    ("add", "*fp16", ("atom.acq_rel.gpu.global.add.noftz.f16",)),
    ("add", "*i64", ("atom.acq_rel.gpu.global.add.u64",)),
])
def test_each_operation_and_type_lowers_to_its_instruction(op, signature, instructions):
    ptr = f"={signature}"
    compiled = rmw_kernel.compile(f"x_ptr{ptr}, out_ptr{ptr}, old_ptr{ptr}, n=i32",
                                  {"BINS": 4, "OP": op, "SEM": "acq_rel", "SCOPE": "gpu", "BLOCK": 128},
                                  arch="sm_90a", stages=("cuda", "ptx", "cubin"))
    for instruction in instructions:
        assert instruction in compiled.asm["ptx"], instruction


@pytest.mark.parametrize("signature", ["*i16", "*fp32", "*i64"])
def test_cas_compiles(signature):
    compiled = cas_kernel.compile(f"ptr={signature}, cmp_ptr={signature}, val_ptr={signature}, "
                                  f"old_ptr={signature}", {"BLOCK": 32}, arch="sm_90a", stages=("cuda", "ptx"))
    bits = {"*i16": 16, "*fp32": 32, "*i64": 64}[signature]
    assert f"atom.acq_rel.gpu.global.cas.b{bits}" in compiled.asm["ptx"]


def test_replicated_elements_are_updated_once_and_read_back_by_all():
    """A 16-element tile on 128 threads: only the owner of each element issues its
    atomic, and the old values come back through shared memory."""
    cuda = small_tile_kernel.compile("out_ptr=*i32, old_ptr=*i32", {"BLOCK": 16}, arch="sm_90a",
                                     stages=("cuda",)).asm["cuda"]
    assert "(lane) & " in cuda and "__syncthreads();" in cuda
    scalar = ticket_kernel.compile("counter_ptr=*i32, tickets_ptr=*i32", {"SEM": "relaxed", "SCOPE": "gpu"},
                                   arch="sm_90a", stages=("cuda",)).asm["cuda"]
    assert "(tid == 0)) ? tlx_atom_add_s32<0, 1>" in scalar


@tlxc.jit
def divergent_kernel(counter_ptr, log_ptr):
    """The user picks the thread: the atomic must run in it, with no barrier."""
    if tlx.thread_id(0) % 32 == 0:
        slot = tl.atomic_add(counter_ptr, 1)
        tl.store(log_ptr + slot, tlx.thread_id(0))


def test_atomic_under_a_thread_id_branch_has_no_barrier_and_no_election():
    cuda = divergent_kernel.compile("counter_ptr=*i32, log_ptr=*i32", arch="sm_90a",
                                    stages=("cuda", "cubin")).asm["cuda"]
    body = cuda[cuda.index("if (s_"):]
    assert "tlx_atom_add_s32<3, 1>" in body
    assert "__syncthreads" not in cuda and "tid == 0" not in cuda


def test_debug_barrier_is_syncthreads():
    cuda = barrier_kernel.compile("x_ptr=*fp32, scratch_ptr=*fp32, out_ptr=*fp32", {"BLOCK": 64},
                                  arch="sm_90a", stages=("cuda", "cubin")).asm["cuda"]
    assert cuda.count("__syncthreads();") >= 1


# -- on the GPU: contention, every sem/scope -------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("sem", SEMS)
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("op", ["add", "max", "min", "and", "or", "xor"])
def test_gpu_contention_integer(op, sem, scope):
    gen = torch.Generator().manual_seed(17)
    n, bins = 64 * 1024 + 77, 3                 # ~1000 programs on 3 addresses
    x = torch.randint(-2**31, 2**31 - 1, (n,), generator=gen, dtype=torch.int64)
    if op == "add":
        x = x % 1000
    x = x.to(torch.int32)
    init = torch.randint(0, 1000, (bins,), generator=gen, dtype=torch.int32)
    out = init.cuda()
    run_rmw(op, x.cuda(), out, bins, sem, scope, block=64, runner=None)
    assert torch.equal(out.cpu(), fold(op, x, init, bins))


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpu_float_min_max(op, dtype):
    gen = torch.Generator().manual_seed(3)
    n, bins = 50_001, 7
    x = torch.randn(n, generator=gen, dtype=dtype)
    init = torch.randn(bins, generator=gen, dtype=dtype)
    out = init.cuda()
    run_rmw(op, x.cuda(), out, bins, runner=None)
    assert torch.equal(out.cpu(), fold(op, x, init, bins))


@pytest.mark.gpu
@pytest.mark.parametrize("sem", SEMS)
@pytest.mark.parametrize("scope", SCOPES)
def test_gpu_scalar_tickets(sem, scope):
    programs = 4096
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    tickets = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    ticket_kernel[(programs,)](counter, tickets, SEM=sem, SCOPE=scope)
    torch.cuda.synchronize()
    assert counter.item() == programs                          # one atomic per program, not per thread
    assert torch.equal(tickets.sort().values.cpu(), torch.arange(programs, dtype=torch.int32))


@pytest.mark.gpu
def test_gpu_small_tile_updates_each_element_once():
    programs, block = 300, 16
    out = torch.zeros(block, dtype=torch.int32, device="cuda")
    old = torch.full((programs * block,), -1, dtype=torch.int32, device="cuda")
    small_tile_kernel[(programs,)](out, old, BLOCK=block)
    torch.cuda.synchronize()
    steps = torch.arange(1, block + 1, dtype=torch.int32)
    assert torch.equal(out.cpu(), programs * steps)
    # the old values of each element are exactly 0, step, 2 * step, ...: one update per program
    seen = old.cpu().reshape(programs, block).sort(0).values
    assert torch.equal(seen, torch.arange(programs, dtype=torch.int32)[:, None] * steps)


@pytest.mark.gpu
@pytest.mark.parametrize("lock_sem, unlock_sem", [("acquire", "release"), ("acq_rel", "acq_rel")])
def test_gpu_spin_lock(lock_sem, unlock_sem):
    programs = 512
    lock = torch.zeros(1, dtype=torch.int32, device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    log = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    lock_kernel[(programs,)](lock, count, log, SEM_LOCK=lock_sem, SEM_UNLOCK=unlock_sem)
    torch.cuda.synchronize()
    assert count.item() == programs and lock.item() == 0
    assert torch.equal(log.sort().values.cpu(), torch.arange(programs, dtype=torch.int32))


@pytest.mark.gpu
def test_gpu_debug_barrier_orders_global_memory():
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(1024, generator=gen).cuda()
    scratch = torch.full_like(x, float("nan"))
    out = torch.full_like(x, float("nan"))
    barrier_kernel[(1,)](x, scratch, out, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x.flip(0))


@pytest.mark.gpu
def test_gpu_atomic_under_a_thread_id_branch():
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    log = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    divergent_kernel[(1,)](counter, log, num_warps=4)
    torch.cuda.synchronize()
    assert counter.item() == 4                                 # one per warp: lanes 0 of warps 0..3
    assert sorted(log.cpu().tolist()) == [0, 32, 64, 96]
