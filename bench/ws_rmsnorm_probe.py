"""Probe the warp-specialized RMSNorm: variants side by side (GPU)."""
import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from rmsnorm import rmsnorm
from ws_rmsnorm import rmsnorm_ws_kernel

m, n = 16384, 8192
x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(x)
nbytes = 4 * x.numel()
sms = torch.cuda.get_device_properties(0).multi_processor_count
print(f"plain: {nbytes / do_bench(lambda: rmsnorm(x, w, 1e-6, out)) / 1e6:.0f} GB/s")
for chunk in (512, 1024, 2048):
    for stages in (2, 3):
        def fn(chunk=chunk, stages=stages):
            rmsnorm_ws_kernel[(sms,)](out, x, w, m, n, 1e-6, BLOCK=8192, CHUNK=chunk, NUM_STAGES=stages,
                                      num_warps=4)
        fn()
        print(f"ws chunk={chunk} stages={stages}: {nbytes / do_bench(fn) / 1e6:.0f} GB/s", flush=True)
