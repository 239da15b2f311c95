"""The Python part of a launch, without a GPU: the generated fast path of
``bench/launch_kernels.py``'s ``empty4`` (3 tensors, 1 int) and ``empty16``
(2 TMA descriptors, 6 tensors, 8 ints), with the driver call replaced by a
no-op and the descriptors' maps by a fake encode.  What it measures is what
``python -m bench.run --only launch`` reports as "tlxc's Python part" on a GPU
machine, on whatever CPU runs it.

    python -m bench.launch_host_probe
"""
from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class _FakeCudaTensor:
    """A CPU tensor that claims to live on cuda:0: enough for a descriptor and its key."""

    is_cuda = True

    def __init__(self, tensor, address: int = 0x7F0000000000):
        self.tensor, self.address, self.dtype, self.shape = tensor, address, tensor.dtype, tensor.shape

    def data_ptr(self) -> int:
        return self.address

    def stride(self):
        return self.tensor.stride()

    def get_device(self) -> int:
        return 0


def _install_plan(kfn, bound: tuple) -> None:
    """Make ``bound``'s specialization launchable with a no-op in place of the driver."""
    from tlxc.runtime import launch as L
    kfn._interpret = False
    kfn._stream = lambda device: 0
    key = L.launch_key(kfn, bound)
    plan = L.LaunchPlan(lambda *args: None, list(range(len(bound))), [False] * len(bound), (128, 1, 1), 0, 0,
                        "compiled")
    kfn.cache[key] = plan
    kfn.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    kfn._fast = L.build_fast_path(kfn, bound)


def main() -> None:
    import launch_kernels as lk
    import torch

    from tlxc.runtime import tma
    tma.encode_tiled = lambda *args: bytes(128)          # no driver: any 128 bytes do
    x = torch.empty(16)
    desc = tma.TensorDescriptor.from_tensor(_FakeCudaTensor(torch.empty(64, 64, dtype=torch.bfloat16)), [64, 64])
    args4, args16 = (x, x, x, 16), (desc, desc, x, x, x, x, x, x) + (16,) * 8
    _install_plan(lk.empty4, args4)
    _install_plan(lk.empty16, args16)
    n = 200_000
    for name, kfn, args in (("4 args", lk.empty4, args4), ("16 args (2 descriptors)", lk.empty16, args16)):
        if kfn[(1,)](*args) != "compiled":
            raise AssertionError(f"{name}: the fast path did not take the installed plan")
        us = min(timeit.repeat(lambda kfn=kfn, args=args: kfn[(1,)](*args), number=n, repeat=3)) / n * 1e6
        print(f"  launch, Python part, {name:<24} {us:6.2f} us")


if __name__ == "__main__":
    main()
