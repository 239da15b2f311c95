"""How many programs of a ``tlxc.ops.matmul`` configuration the GPU keeps resident: the
driver's occupancy answers (blocks per SM; for cluster launches, clusters at once), against
the programs the launch has.  Written for issue 22's DSMEM split-K (``_kSc``) configurations,
which measured 0.39x cuBLAS at 64x4096x4096T where 0.93-1.0 was predicted: a launch with more
clusters than fit at once runs a second wave, the kernel's time doubled.

    python bench/cluster_occupancy_probe.py [--shape 64x4096x4096T] [NAME ...]

One line per configuration: registers, shared bytes, blocks per SM, resident clusters
(cuOccupancyMaxActiveClusters) and the launch's programs / clusters.  Compiles on the CPU
(sm_90a), loads the cubin on the current GPU; launches nothing.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

DEFAULT = ["dot_64x64x64_s4_w4_k4", "dot_64x64x64_s3_w4_k4c", "dot_64x64x128_s3_w4_k2c",
           "dot_64x64x128_s4_w4_k2c", "dot_128x64x64_s3_w4_k2c"]


def main() -> None:
    import torch

    from bench.ops_matmul_bench import parse_shapes
    from tlxc.ops import CONFIGS
    from tlxc.runtime import driver as drv

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="64x4096x4096T")
    parser.add_argument("names", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    (M, N, K, bk), = parse_shapes(args.shape)
    lib = drv._driver()
    lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                                                                ctypes.c_int, ctypes.c_size_t]
    lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_void_p]
    torch.cuda.init()
    dev = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    print(f"{torch.cuda.get_device_name()}: {sms} SMs; shape {args.shape}")
    for name in args.names:
        try:
            print(_probe(name, CONFIGS[name], (M, N, K, bk), dev, sms, lib), flush=True)
        except Exception as exc:            # one line per configuration, whatever happens
            print(f"{name:28s} FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def _probe(name, c, shape, dev, sms, lib) -> str:
    import torch

    from bench.ops_matmul_bench import _operands
    from tlxc.ops.matmul import compile_config
    from tlxc.runtime import driver as drv
    M, N, K, bk = shape
    a, b = _operands(M, N, K, bk, torch.bfloat16, "cpu")
    h = compile_config(name, a, b)[0]
    smem = h.metadata.shared
    fn = drv.CudaModule.load(h.asm["cubin"], dev).function(h.metadata.name, dev)
    fn.set_dynamic_smem(smem)
    per_sm = ctypes.c_int()
    with drv._ContextPushed(dev):
        drv._check(lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(per_sm), fn.handle,
                                                                   32 * c.warps, smem), "occupancy")
    Mt, Nt = (N, M) if c.swap else (M, N)
    tiles = -(-Mt // c.bm) * -(-Nt // c.bn)
    progs = tiles * c.split_k
    line = (f"{name:28s} {h.n_regs:3d} regs {smem:7d} B shared: {per_sm.value} blocks/SM "
            f"({per_sm.value * sms} resident); launch {progs} programs")
    if c.cluster_split:
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = tiles, c.split_k, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32 * c.warps, 1, 1
        cfg.sharedMemBytes = smem
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 1, c.split_k, 1
        cfg.attrs = ctypes.pointer(attr)
        cfg.numAttrs = 1
        clusters = ctypes.c_int()
        with drv._ContextPushed(dev):
            drv._check(lib.cuOccupancyMaxActiveClusters(ctypes.byref(clusters), fn.handle,
                                                        ctypes.byref(cfg)), "cluster occupancy")
        waves = -(-tiles // max(clusters.value, 1))
        line += f" = {tiles} clusters of {c.split_k}; {clusters.value} clusters resident: {waves} wave(s)"
    else:
        line += f": {-(-progs // max(per_sm.value * sms, 1))} wave(s)"
    return line


if __name__ == "__main__":
    main()
