"""Ping-pong: two consumer warp groups take turns through a critical section,
ordered by named barriers (TLX's ``hopper-persistent-gemm-ws-pingpong`` idiom).

Consumer ``c`` waits on named barrier ``9 + c`` (256 threads: its own 128
waiting plus the other group's 128 arriving), runs its turn, then arrives on
the other's barrier.  Consumer 1 pre-arrives on barrier 9 so that consumer 0
goes first.  Each turn appends the consumer's id to a log through an atomic
counter, so the log shows the order: 0, 1, 0, 1, ...

    python examples/ws_pingpong.py
    TLXC_INTERPRET=1 python examples/ws_pingpong.py
    tlxc trace examples/ws_pingpong.py -o timeline.html    # the turns, drawn
"""
from __future__ import annotations

import torch

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def pingpong_kernel(log_ptr: tl.pointer_type(tl.int32), counter_ptr: tl.pointer_type(tl.int32),
                    turns: tl.int32):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2):
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)          # let consumer 0 go first
            for t in range(turns):
                tlx.named_barrier_wait(9 + cid, 256)      # my turn
                if tlx.thread_id(0) % 128 == 0:
                    slot = tl.atomic_add(counter_ptr, 1)
                    tl.store(log_ptr + slot, cid)
                tlx.fence("gpu")
                tlx.named_barrier_arrive(9 + (1 - cid), 256)   # pass the turn
            if cid == 0:
                tlx.named_barrier_wait(9, 256)           # absorb consumer 1's last pass


def pingpong(turns: int, device: str = "cuda") -> torch.Tensor:
    log = torch.full((2 * turns,), -1, dtype=torch.int32, device=device)
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    pingpong_kernel[(1,)](log, counter, turns, num_warps=4)
    return log


def check_inputs():
    """A small launch for ``tlxc trace examples/ws_pingpong.py -o timeline.html``:
    four turns each."""
    log = torch.full((8,), -1, dtype=torch.int32)
    counter = torch.zeros(1, dtype=torch.int32)
    return (1,), (log, counter, 4), {"num_warps": 4}


def main() -> None:
    from _harness import device, setup
    setup()
    log = pingpong(8, device())
    expected = torch.tensor([0, 1] * 8, dtype=torch.int32)
    print("  ping-pong log:", log.tolist())
    if not torch.equal(log.cpu(), expected):
        raise AssertionError(f"expected alternating turns {expected.tolist()}, got {log.tolist()}")
    print("  ping-pong order ok")


if __name__ == "__main__":
    main()
