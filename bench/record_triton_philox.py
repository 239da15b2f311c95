"""Record what real Triton's random-number functions return, as the fixture of tests/test_random.py.

Run on a machine with a CUDA GPU and Triton installed (the H200 has triton 3.6):

    python bench/record_triton_philox.py [OUT.json]        # default: tests/data/philox_triton.json

For a handful of seeds (an int32 one, a negative one, one above 2**32, one above 2**63) and of
offset ranges (0..n, near 2**31, int64 offsets around 2**32 and at 2**40), a Triton kernel
computes tl.randint4x, tl.randint, tl.rand, tl.randn, tl.rand4x and tl.randn4x; a second kernel
runs tl.philox on chosen counters (Random123's known-answer vectors among them) and a third
tl.uint_to_uniform_float on edge-case integers.  The JSON records each case's inputs with its
outputs (integers as uint32, floats as the exact float32 values), so the test replays the same
calls through tlxc without knowing the cases in advance.

This file is the only place in the project that imports triton; nothing of Triton's is copied.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
import triton
import triton.language as tl

BLOCK = 128
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "data", "philox_triton.json")

# (seed, offset_base, n, n_rounds): offsets are offset_base + 0..n-1, int32 when offset_base fits
# in int32 and int64 otherwise (as a kernel argument's value decides).  n is not a multiple of BLOCK.
STREAM_CASES = [
    (42, 0, 300, 10),
    (0, 0, 70, 10),
    (-1, 0, 70, 10),                         # sign-extended to 0xFFFF_FFFF_FFFF_FFFF
    (3_000_000_000, 0, 70, 10),              # an int64 argument whose high half is 0
    (2**32 + 7, 0, 130, 10),                 # both key words used
    (0xDEADBEEFCAFEF00D, 0, 70, 10),         # a uint64 argument
    (12345, 2**31 - 300, 300, 10),           # int32 offsets up to 2**31 - 1
    (12345, 2**32 - 100, 200, 10),           # int64 offsets across 2**32: the counter's word 1
    (7, 2**40 + 3, 130, 10),
    (42, 0, 100, 7),                         # n_rounds=7
]

# Counters for tl.philox: Random123's known-answer vectors (zeros, all ones, pi's digits) and
# some random words; each row is (c0, c1, c2, c3) as uint32.
PHILOX_SEEDS = [0, 2**64 - 1, 0x299F31D0A4093822, 42]


def philox_counters() -> np.ndarray:
    fixed = np.array([[0, 0, 0, 0], [0xFFFFFFFF] * 4, [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]],
                     dtype=np.uint32)
    rng = np.random.default_rng(2024)
    random_rows = rng.integers(0, 2**32, size=(37, 4), dtype=np.uint64).astype(np.uint32)
    return np.concatenate([fixed, random_rows])


def uniform_inputs() -> np.ndarray:
    edges = np.array([0, 1, -1, 2**31 - 1, -2**31, 2**30, -2**30, 127, -128, 0x7FFFFF, 0x800000],
                     dtype=np.int64)
    rng = np.random.default_rng(7)
    return np.concatenate([edges, rng.integers(-2**31, 2**31, size=89)]).astype(np.int32)


_to_uniform = getattr(tl, "uint_to_uniform_float", None) or tl.uint32_to_uniform_float


@triton.jit
def streams_kernel(ints_ptr, floats_ptr, seed, offset_base, n, N_ROUNDS: tl.constexpr,
                   BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    offsets = offset_base + idx
    r0, r1, r2, r3 = tl.randint4x(seed, offsets, N_ROUNDS)
    tl.store(ints_ptr + 0 * n + idx, r0.to(tl.int32, bitcast=True), mask=mask)
    tl.store(ints_ptr + 1 * n + idx, r1.to(tl.int32, bitcast=True), mask=mask)
    tl.store(ints_ptr + 2 * n + idx, r2.to(tl.int32, bitcast=True), mask=mask)
    tl.store(ints_ptr + 3 * n + idx, r3.to(tl.int32, bitcast=True), mask=mask)
    tl.store(ints_ptr + 4 * n + idx, tl.randint(seed, offsets, N_ROUNDS).to(tl.int32, bitcast=True), mask=mask)
    tl.store(floats_ptr + 0 * n + idx, tl.rand(seed, offsets, N_ROUNDS), mask=mask)
    tl.store(floats_ptr + 1 * n + idx, tl.randn(seed, offsets, N_ROUNDS), mask=mask)
    u0, u1, u2, u3 = tl.rand4x(seed, offsets, N_ROUNDS)
    tl.store(floats_ptr + 2 * n + idx, u0, mask=mask)
    tl.store(floats_ptr + 3 * n + idx, u1, mask=mask)
    tl.store(floats_ptr + 4 * n + idx, u2, mask=mask)
    tl.store(floats_ptr + 5 * n + idx, u3, mask=mask)
    g0, g1, g2, g3 = tl.randn4x(seed, offsets, N_ROUNDS)
    tl.store(floats_ptr + 6 * n + idx, g0, mask=mask)
    tl.store(floats_ptr + 7 * n + idx, g1, mask=mask)
    tl.store(floats_ptr + 8 * n + idx, g2, mask=mask)
    tl.store(floats_ptr + 9 * n + idx, g3, mask=mask)


@triton.jit
def philox_kernel(counters_ptr, out_ptr, seed, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    c0 = tl.load(counters_ptr + idx * 4 + 0, mask=mask)
    c1 = tl.load(counters_ptr + idx * 4 + 1, mask=mask)
    c2 = tl.load(counters_ptr + idx * 4 + 2, mask=mask)
    c3 = tl.load(counters_ptr + idx * 4 + 3, mask=mask)
    r0, r1, r2, r3 = tl.philox(seed, c0, c1, c2, c3)
    tl.store(out_ptr + idx * 4 + 0, r0.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 1, r1.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 2, r2.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 3, r3.to(tl.int32, bitcast=True), mask=mask)


@triton.jit
def uniform_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    tl.store(out_ptr + idx, _to_uniform(tl.load(x_ptr + idx, mask=mask)), mask=mask)


def as_uint32(t: torch.Tensor) -> list[int]:
    return [int(v) for v in t.cpu().numpy().astype(np.int32).view(np.uint32).ravel()]


def as_floats(t: torch.Tensor) -> list[float]:
    return [float(v) for v in t.cpu().numpy().astype(np.float32).ravel()]   # exact: f32 ⊂ f64


def record_streams() -> list[dict]:
    cases = []
    for seed, base, n, rounds in STREAM_CASES:
        ints = torch.full((5, n), -7, dtype=torch.int32, device="cuda")
        floats = torch.full((10, n), -7.0, dtype=torch.float32, device="cuda")
        streams_kernel[(triton.cdiv(n, BLOCK),)](ints, floats, seed, base, n, N_ROUNDS=rounds, BLOCK=BLOCK)
        torch.cuda.synchronize()
        rows = [as_uint32(ints[i]) for i in range(5)]
        frows = [as_floats(floats[i]) for i in range(10)]
        cases.append({"seed": seed, "offset_base": base, "n": n, "n_rounds": rounds,
                      "offset_dtype": "int32" if -2**31 <= base < 2**31 else "int64",
                      "randint4x": rows[:4], "randint": rows[4], "rand": frows[0], "randn": frows[1],
                      "rand4x": frows[2:6], "randn4x": frows[6:10]})
    return cases


def record_philox() -> list[dict]:
    counters = philox_counters()
    n = counters.shape[0]
    device_counters = torch.from_numpy(counters.view(np.int32).copy()).cuda()
    cases = []
    for seed in PHILOX_SEEDS:
        out = torch.full((n, 4), -7, dtype=torch.int32, device="cuda")
        philox_kernel[(triton.cdiv(n, BLOCK),)](device_counters, out, seed, n, BLOCK=BLOCK)
        torch.cuda.synchronize()
        result = np.array(as_uint32(out)).reshape(n, 4)
        cases.append({"seed": seed, "counters": counters.astype(np.int64).tolist(), "out": result.tolist()})
    return cases


def record_uniform() -> dict:
    x = uniform_inputs()
    out = torch.full((x.size,), -7.0, dtype=torch.float32, device="cuda")
    uniform_kernel[(triton.cdiv(x.size, BLOCK),)](torch.from_numpy(x).cuda(), out, x.size, BLOCK=BLOCK)
    torch.cuda.synchronize()
    return {"x": [int(v) for v in x], "out": as_floats(out)}


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else DEFAULT_OUT
    fixture = {
        "format": 1,
        "what": "Triton's tl.randint4x/randint/rand/randn/rand4x/randn4x/philox/uint_to_uniform_float "
                "outputs, recorded by bench/record_triton_philox.py",
        "triton_version": triton.__version__,
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "block": BLOCK,
        "streams": record_streams(),
        "philox": record_philox(),
        "uniform": record_uniform(),
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(fixture['streams'])} stream cases, {len(fixture['philox'])} philox seeds, "
          f"triton {triton.__version__} on {fixture['device']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
