"""Warp-specialized RMSNorm: a cp.async producer and two consumer warp groups.

Persistent programs walk "items" of two rows.  The producer task (the default
task, 4 warps) streams each item's rows into an ``NUM_STAGES``-slot ring in
shared memory with cp.async and signals the slot's ``full`` barrier; two
replicated consumer tasks (4 warps each, one row each) wait on ``full``,
reduce the sum of squares, normalize, write the row, and release the slot on
its ``empty`` barrier (``arrive_count=2``: one arrival per consumer).  The
consumers get a larger register budget (``setmaxnreg``) than the producer.

It exists to prove the machinery (tasks, ring, phases, replicas, register
reallocation); the plain ``examples/rmsnorm.py`` is the fast one.

    python examples/ws_rmsnorm.py
    TLXC_INTERPRET=1 python examples/ws_rmsnorm.py
    tlxc trace examples/ws_rmsnorm.py -o timeline.html     # the pipeline, drawn
"""
from __future__ import annotations

from functools import partial

import torch

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def rmsnorm_ws_kernel(out_ptr: tl.pointer_type(tl.bfloat16), x_ptr: tl.pointer_type(tl.bfloat16),
                      weight_ptr: tl.pointer_type(tl.bfloat16), n_rows: tl.int32, n_cols: tl.int32,
                      eps: tl.float32, BLOCK: tl.constexpr = 1024, CHUNK: tl.constexpr = 512,
                      NUM_STAGES: tl.constexpr = 3):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    n_items = tl.cdiv(n_rows, 2)
    rows_buf = tlx.local_alloc((2, BLOCK), tl.bfloat16, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):                 # producer: cp.async into the ring
            # Item k's copies are committed as one group; the slot is handed over one
            # item later (wait_group(1)), so two items' copies are in flight at once.
            count = 0
            for item in range(pid, n_items, num_programs):
                slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                tlx.barrier_wait(empty[slot], phase ^ 1)
                rows = item * 2 + tl.arange(0, 2)
                for c in tl.static_range(BLOCK // CHUNK):
                    cols = c * CHUNK + tl.arange(0, CHUNK)
                    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
                    dst = tlx.local_slice(rows_buf[slot], [0, c * CHUNK], [2, CHUNK])
                    tlx.async_load(x_ptr + rows[:, None] * n_cols + cols[None, :], dst, mask=mask)
                tlx.async_load_commit_group()
                if NUM_STAGES == 1:                             # nothing to overlap with
                    tlx.async_load_wait_group(0)
                    tlx.barrier_arrive(full[slot])
                elif count > 0:
                    tlx.async_load_wait_group(1)                # the previous item has landed
                    tlx.barrier_arrive(full[(count - 1) % NUM_STAGES])
                count += 1
            if NUM_STAGES > 1 and count > 0:
                tlx.async_load_wait_group(0)
                tlx.barrier_arrive(full[(count - 1) % NUM_STAGES])
        with tlx.async_task(num_warps=4, registers=200, replicate=2):    # consumers: one row each
            r = tlx.async_task_replica_id()
            count = 0
            for item in range(pid, n_items, num_programs):
                slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                tlx.barrier_wait(full[slot], phase)
                row = tlx.local_slice(rows_buf[slot], [r, 0], [1, BLOCK])
                squares = tl.zeros((1, CHUNK), tl.float32)
                for c in tl.static_range(BLOCK // CHUNK):
                    x = tlx.local_load(tlx.local_slice(row, [0, c * CHUNK], [1, CHUNK])).to(tl.float32)
                    squares += x * x
                rstd = tl.rsqrt(tl.sum(squares) / n_cols + eps)
                out_row = item * 2 + r
                for c in tl.static_range(BLOCK // CHUNK):
                    cols = c * CHUNK + tl.arange(0, CHUNK)[None, :]
                    mask = (cols < n_cols) & (out_row < n_rows)
                    x = tlx.local_load(tlx.local_slice(row, [0, c * CHUNK], [1, CHUNK])).to(tl.float32)
                    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                    tl.store(out_ptr + out_row * n_cols + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)
                tlx.barrier_arrive(empty[slot])
                count += 1  # noqa: SIM113 (a runtime loop-carried counter: kernels have no enumerate)


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def rmsnorm_ws(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None,
               *, num_stages: int = 3, programs: int | None = None) -> torch.Tensor:
    """RMSNorm over the rows of a contiguous 2-D bfloat16 ``x``."""
    if x.dim() != 2 or x.dtype != torch.bfloat16 or not x.is_contiguous():
        raise ValueError("rmsnorm_ws expects a contiguous 2-D bfloat16 tensor")
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    block = max(64, next_power_of_2(n_cols))
    chunk = min(block, 1024)     # 128 threads x 8 elements: no duplicated accesses
    if programs is None:
        programs = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    programs = max(1, min(programs, (n_rows + 1) // 2))
    rmsnorm_ws_kernel[(programs,)](out, x, weight, n_rows, n_cols, eps, BLOCK=block, CHUNK=chunk,
                                   NUM_STAGES=num_stages, num_warps=4)
    return out


def check_inputs():
    """A small launch for ``tlxc trace examples/ws_rmsnorm.py -o timeline.html``:
    one program, four items of two rows through a two-slot ring (so each slot's
    phases wrap), two cp.async chunks per row."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 64, generator=gen).to(torch.bfloat16)
    weight = torch.randn(64, generator=gen).to(torch.bfloat16)
    out = torch.empty_like(x)
    return (1,), (out, x, weight, 8, 64, 1e-6), {"BLOCK": 64, "CHUNK": 32, "NUM_STAGES": 2, "num_warps": 4}


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup
    from rmsnorm import reference, rmsnorm

    on_gpu = setup()
    shapes = [(333, 4000), (16384, 8192)] if on_gpu else [(5, 100), (7, 300)]
    for n_rows, n_cols in shapes:
        x = torch.randn(n_rows, n_cols, device=device(), dtype=torch.bfloat16)
        w = torch.randn(n_cols, device=device(), dtype=torch.bfloat16)
        out = rmsnorm_ws(x, w, 1e-6, poisoned_like(x))
        check(f"ws rmsnorm {n_rows}x{n_cols}", out, reference(x, w, 1e-6))
        if on_gpu:
            ws_ms = bench(partial(rmsnorm_ws, x, w, 1e-6, out))
            plain_ms = bench(partial(rmsnorm, x, w, 1e-6, out))
            report(f"ws rmsnorm vs plain {n_rows}x{n_cols}", ws_ms, plain_ms, nbytes=4 * x.numel())


if __name__ == "__main__":
    main()
