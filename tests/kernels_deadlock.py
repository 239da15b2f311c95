"""Kernels that hang on purpose, for the GPU watchdog test (run in a subprocess)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def wait_forever(out_ptr: tl.pointer_type(tl.int32)):
    bars = tlx.alloc_barriers(2, arrive_count=1)
    tlx.barrier_wait(bars[1], 0)          # nobody ever arrives: phase 0 never completes
    tl.store(out_ptr, 1)


def main():
    import time

    import torch
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    print(f"launching at {time.monotonic():.6f}", flush=True)
    wait_forever[(1,)](out)
    torch.cuda.synchronize()
    print("finished?", out.item())


if __name__ == "__main__":
    main()
