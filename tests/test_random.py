"""``tl.randint4x`` / ``randint`` / ``rand`` / ``randn`` / ``rand4x`` / ``randn4x`` / ``philox`` /
``uint_to_uniform_float`` / ``pair_uniform_to_normal``: Triton's Philox-4x32-10 stream.

Three independent checks:

1. the interpreter against a Philox written here on Python integers, itself checked against
   Random123's published known-answer vectors (integers exact, ``rand`` exact, ``randn`` within a
   bound fitted to float32 ``log``/``sqrt``/``cos``);
2. the interpreter against values recorded from real Triton on a GPU
   (``tests/data/philox_triton.json``, written by ``bench/record_triton_philox.py``; the test
   skips, saying so, until the fixture exists);
3. (``gpu`` marker) tlxc on the GPU against the interpreter, and sm_90a cubins without a GPU.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir.types import PointerType, f32, i32, i64, u64

BLOCK = 128
POISON_INT = -7
POISON_FLOAT = -7.0
FIXTURE = os.path.join(os.path.dirname(__file__), "data", "philox_triton.json")
MASK32, MASK64 = 2**32 - 1, 2**64 - 1

# Random123's known-answer vectors for Philox-4x32-10 and Philox-4x64-10 (kat_vectors):
# (counter, key, expected output).
KAT_4X32 = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
KAT_4X64_ZERO = (0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B)


# -- the reference: Philox on Python integers, independent of tlxc ----------------------------

def philox_ref(counter, key, rounds: int = 10, bits: int = 32) -> tuple[int, ...]:
    """One Philox-4xW evaluation (Salmon et al., SC'11; Random123's round and key schedule)."""
    mask = (1 << bits) - 1
    if bits == 32:
        m0, m1, w0, w1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    else:
        m0, m1, w0, w1 = 0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(rounds):
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = (p1 >> bits) ^ c1 ^ k0, p1 & mask, (p0 >> bits) ^ c3 ^ k1, p0 & mask
        k0, k1 = (k0 + w0) & mask, (k1 + w1) & mask
    return c0, c1, c2, c3


def randint4x_ref(seed: int, offsets, rounds: int = 10, wide_offsets: bool = False) -> np.ndarray:
    """Triton's stream: key = the seed's two 32-bit halves (the seed sign-extended to 64 bits),
    counter = (offset low word, offset high word for a 64-bit offset else 0, 0, 0)."""
    seed &= MASK64
    key = (seed & MASK32, seed >> 32)
    rows = [philox_ref((int(o) & MASK32, (int(o) >> 32) & MASK32 if wide_offsets else 0, 0, 0), key, rounds)
            for o in offsets]
    return np.array(rows, dtype=np.uint64).T.astype(np.uint32)


def uniform_ref(bits: np.ndarray) -> np.ndarray:
    """uint32 → float32 in [0, 1), exactly as float32 arithmetic gives it."""
    x = bits.astype(np.uint32).view(np.int32).astype(np.int64)
    folded = np.where(x < 0, -x - 1, x)
    return folded.astype(np.float32) * np.float32(4.6566127342e-10)


def normal_ref(u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Box-Muller in float64 from the float32 uniforms, with the float32 angle the kernel forms;
    also returns the radius (the error bound scales with it)."""
    u1 = np.maximum(np.float32(1e-7), u1.astype(np.float32)).astype(np.float64)
    theta = (np.float32(6.283185307179586) * u2.astype(np.float32)).astype(np.float64)
    r = np.sqrt(-2.0 * np.log(u1))
    return r * np.cos(theta), r * np.sin(theta), r


def normal_bound(r: np.ndarray, scale: float) -> np.ndarray:
    """Absolute error allowed on r·cos(θ) computed in float32: a few ulps of r (log, sqrt, cos,
    each within 1-2 ulps, and the products' roundings)."""
    return scale * np.spacing(np.maximum(r, 1.0).astype(np.float32)).astype(np.float64)


def test_reference_matches_random123_known_answers():
    for counter, key, expected in KAT_4X32:
        assert philox_ref(counter, key) == expected
    assert philox_ref((0, 0, 0, 0), (0, 0), bits=64) == KAT_4X64_ZERO


# -- kernels, written as a Triton user writes them ------------------------------------------

@tlxc.kernel
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


@tlxc.kernel
def philox_kernel(counters_ptr, out_ptr, seed, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    c0 = tl.load(counters_ptr + idx * 4 + 0, mask=mask)
    c1 = tl.load(counters_ptr + idx * 4 + 1, mask=mask)
    c2 = tl.load(counters_ptr + idx * 4 + 2, mask=mask)
    c3 = tl.load(counters_ptr + idx * 4 + 3, mask=mask)
    r0, r1, r2, r3 = tl.philox(seed, c0, c1, c2, c3)
    tl.store(out_ptr + idx * 4 + 0, r0.to(out_ptr.dtype.element_ty, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 1, r1.to(out_ptr.dtype.element_ty, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 2, r2.to(out_ptr.dtype.element_ty, bitcast=True), mask=mask)
    tl.store(out_ptr + idx * 4 + 3, r3.to(out_ptr.dtype.element_ty, bitcast=True), mask=mask)


@tlxc.kernel
def uniform_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    tl.store(out_ptr + idx, tl.uint_to_uniform_float(tl.load(x_ptr + idx, mask=mask)), mask=mask)


@tlxc.kernel
def normal_pair_kernel(u_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    n1, n2 = tl.pair_uniform_to_normal(tl.load(u_ptr + idx, mask=mask), tl.load(u_ptr + n + idx, mask=mask))
    tl.store(out_ptr + idx, n1, mask=mask)
    tl.store(out_ptr + n + idx, n2, mask=mask)


@tlxc.kernel
def dropout_kernel(x_ptr, out_ptr, n, p, SEED: tl.constexpr, BLOCK: tl.constexpr):
    """Triton's low-memory dropout tutorial's shape: a literal seed, rand > p keeps the element."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = tl.rand(SEED, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def run_streams(seed: int, base: int, n: int, rounds: int, device: str = "cpu"):
    ints = torch.full((5, n), POISON_INT, dtype=torch.int32, device=device)
    floats = torch.full((10, n), POISON_FLOAT, dtype=torch.float32, device=device)
    launcher = tlxc.interpret(streams_kernel) if device == "cpu" else streams_kernel
    launcher[(cdiv(n, BLOCK),)](ints, floats, seed, base, n, N_ROUNDS=rounds, BLOCK=BLOCK)
    return ints.cpu().numpy().view(np.uint32), floats.cpu().numpy()


def run_philox(counters: np.ndarray, seed: int, device: str = "cpu") -> np.ndarray:
    """``counters``: (rows, 4) of int32 or int64; returns the outputs with the same dtype's bits."""
    signed = counters.astype(np.int32 if counters.dtype.itemsize == 4 else np.int64)
    out = torch.full(counters.shape, POISON_INT, dtype=torch.from_numpy(signed).dtype, device=device)
    launcher = tlxc.interpret(philox_kernel) if device == "cpu" else philox_kernel
    launcher[(cdiv(len(counters), BLOCK),)](torch.from_numpy(signed.copy()).to(device), out, seed,
                                            len(counters), BLOCK=BLOCK)
    return out.cpu().numpy().view(np.uint32 if signed.itemsize == 4 else np.uint64)


# -- 1. the interpreter against the reference ---------------------------------------------

STREAM_CASES = [           # (seed, offset_base, n, n_rounds)
    (42, 0, 200, 10),
    (-1, 0, 70, 10),                      # sign-extended: key (0xFFFFFFFF, 0xFFFFFFFF)
    (2**32 + 7, 0, 70, 10),               # an int64 seed: both key words
    (0xDEADBEEFCAFEF00D, 2**31 - 150, 150, 10),   # a uint64 seed; int32 offsets up to 2**31 - 1
    (12345, 2**32 - 60, 130, 10),         # int64 offsets across 2**32: the counter's second word
    (5, 0, 70, 7),                        # n_rounds=7
]


@pytest.mark.parametrize("seed,base,n,rounds", STREAM_CASES)
def test_streams_match_reference(seed, base, n, rounds):
    ints, floats = run_streams(seed, base, n, rounds)
    offsets = np.arange(n, dtype=np.int64) + base
    expected = randint4x_ref(seed, offsets, rounds, wide_offsets=not -2**31 <= base < 2**31)
    np.testing.assert_array_equal(ints[:4], expected)
    np.testing.assert_array_equal(ints[4], expected[0])
    np.testing.assert_array_equal(floats[0], uniform_ref(expected[0]))
    for i in range(4):
        np.testing.assert_array_equal(floats[2 + i], uniform_ref(expected[i]))
    uniforms = [uniform_ref(row) for row in expected]
    pairs = [normal_ref(uniforms[0], uniforms[1]), normal_ref(uniforms[2], uniforms[3])]
    got_normals = [floats[1], floats[6], floats[7], floats[8], floats[9]]
    want = [(pairs[0][0], pairs[0][2]), (pairs[0][0], pairs[0][2]), (pairs[0][1], pairs[0][2]),
            (pairs[1][0], pairs[1][2]), (pairs[1][1], pairs[1][2])]
    for got, (ref, r) in zip(got_normals, want):
        assert np.all(np.abs(got - ref) <= normal_bound(r, 4)), np.max(np.abs(got - ref))


def test_rand_is_in_unit_interval_and_uniform():
    _, floats = run_streams(2024, 0, 1000, 10)
    u = floats[0]
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.03 and abs(u.var() - 1 / 12) < 0.01
    g = floats[1]
    assert abs(g.mean()) < 0.1 and abs(g.std() - 1.0) < 0.1


def test_philox_known_answers_and_random_counters():
    rng = np.random.default_rng()
    counters = np.concatenate([np.array([c for c, _, _ in KAT_4X32], dtype=np.uint64),
                               rng.integers(0, 2**32, size=(150, 4), dtype=np.uint64)]).astype(np.uint32)
    for seed in (0, 2**64 - 1, 0x299F31D0A4093822, int(rng.integers(-2**31, 2**31))):
        got = run_philox(counters.view(np.int32), seed)
        key = ((seed & MASK64) & MASK32, (seed & MASK64) >> 32)
        expected = np.array([philox_ref(tuple(int(v) for v in row), key) for row in counters], dtype=np.uint32)
        np.testing.assert_array_equal(got, expected)
    for counter, key, output in KAT_4X32:        # the published vectors themselves
        seed = key[0] | key[1] << 32
        assert tuple(run_philox(np.array([counter], dtype=np.uint32).view(np.int32), seed)[0]) == output


def test_philox_on_64_bit_counters_is_philox_4x64():
    rng = np.random.default_rng()
    counters = np.concatenate([np.zeros((1, 4), dtype=np.uint64),
                               rng.integers(0, 2**63, size=(20, 4), dtype=np.uint64) * 2 + 1])
    seed = int(rng.integers(0, 2**62))
    got = run_philox(counters.view(np.int64), seed)
    expected = np.array([philox_ref(tuple(int(v) for v in row), (seed, 0), bits=64) for row in counters],
                        dtype=np.uint64)
    assert tuple(int(v) for v in got[0]) == philox_ref((0, 0, 0, 0), (seed, 0), bits=64)
    np.testing.assert_array_equal(got, expected)
    if seed == 0:
        assert tuple(int(v) for v in got[0]) == KAT_4X64_ZERO


def test_uint_to_uniform_float_edges_exact():
    edges = np.array([0, 1, -1, 2**31 - 1, -2**31, 0x7FFFFF, 0x800000], dtype=np.int64)
    x = np.concatenate([edges, np.random.default_rng().integers(-2**31, 2**31, size=193)]).astype(np.int32)
    out = torch.full((x.size,), POISON_FLOAT)
    tlxc.interpret(uniform_kernel)[(cdiv(x.size, BLOCK),)](torch.from_numpy(x), out, x.size, BLOCK=BLOCK)
    np.testing.assert_array_equal(out.numpy(), uniform_ref(x.view(np.uint32)))
    assert out.numpy().max() < 1.0 and out.numpy()[0] == 0.0


def test_pair_uniform_to_normal_box_muller():
    n = 150
    u = np.random.default_rng().random((2, n)).astype(np.float32)
    u[0, :3] = [0.0, 1e-9, 0.5]                    # 0 and tiny u1 clamp to 1e-7
    out = torch.full((2, n), POISON_FLOAT)
    tlxc.interpret(normal_pair_kernel)[(cdiv(n, BLOCK),)](torch.from_numpy(u), out, n, BLOCK=BLOCK)
    n1, n2, r = normal_ref(u[0], u[1])
    got = out.numpy()
    assert np.all(np.abs(got[0] - n1) <= normal_bound(r, 4)) and np.all(np.abs(got[1] - n2) <= normal_bound(r, 4))
    clamped_radius = math.sqrt(-2 * math.log(np.float32(1e-7)))     # u1 = 0 and 1e-9 give this radius
    assert np.allclose(np.hypot(got[0, :2], got[1, :2]), clamped_radius, rtol=1e-6, atol=0)


def test_dropout_with_literal_seed():
    n, p = 300, 0.3
    x = torch.randn(n)
    out = torch.full((n,), POISON_FLOAT)
    tlxc.interpret(dropout_kernel)[(cdiv(n, BLOCK),)](x, out, n, p, SEED=1234, BLOCK=BLOCK)
    keep = uniform_ref(randint4x_ref(1234, range(n))[0]) > np.float32(p)
    expected = np.where(keep, x.numpy() / np.float32(1 - p), 0.0).astype(np.float32)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=0)
    assert 0.6 < keep.mean() < 0.8


# -- errors ----------------------------------------------------------------------------------

@tlxc.kernel
def float_seed_kernel(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(seed, offs))


@tlxc.kernel
def float_offset_kernel(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(seed, offs * 0.5))


@tlxc.kernel
def runtime_rounds_kernel(out_ptr, seed, rounds, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(seed, offs, rounds))


@pytest.mark.parametrize("kernel,arg,message", [
    (float_seed_kernel, 1.5, "the seed must be an integer"),
    (float_offset_kernel, 3, "the offsets must be integers"),
    (runtime_rounds_kernel, 3, "must be compile-time constants"),
])
def test_bad_arguments_are_located_errors(kernel, arg, message):
    out = torch.zeros(16)
    args = (out, arg, 5) if kernel is runtime_rounds_kernel else (out, arg)
    with pytest.raises(CompilationError) as info:
        tlxc.interpret(kernel)[(1,)](*args, BLOCK=16)
    text = str(info.value)
    assert message in text and "test_random.py" in text, text


# -- 2. the interpreter against values recorded from Triton --------------------------------

def _fixture() -> dict:
    if not os.path.exists(FIXTURE):
        pytest.skip(f"{os.path.relpath(FIXTURE)} not recorded yet: run "
                    f"`python bench/record_triton_philox.py` on a GPU with Triton installed")
    with open(FIXTURE) as f:
        return json.load(f)


def test_streams_match_recorded_triton():
    fixture = _fixture()
    for case in fixture["streams"]:
        ints, floats = run_streams(case["seed"], case["offset_base"], case["n"], case["n_rounds"])
        where = f"seed={case['seed']} offset_base={case['offset_base']} n_rounds={case['n_rounds']}"
        recorded = np.array(case["randint4x"], dtype=np.uint64).astype(np.uint32)
        np.testing.assert_array_equal(ints[:4], recorded, err_msg=f"randint4x, {where}")
        np.testing.assert_array_equal(ints[4], np.array(case["randint"], dtype=np.uint32), err_msg=where)
        np.testing.assert_array_equal(floats[0], np.array(case["rand"], dtype=np.float32), err_msg=where)
        np.testing.assert_array_equal(floats[2:6], np.array(case["rand4x"], dtype=np.float32), err_msg=where)
        # Normals: the GPU's logf/sqrtf/cosf may differ from the host's in the last bits.
        r = normal_ref(uniform_ref(recorded[0]), uniform_ref(recorded[1]))[2]
        r_hi = normal_ref(uniform_ref(recorded[2]), uniform_ref(recorded[3]))[2]
        triton_normals = np.array([case["randn"]] + case["randn4x"], dtype=np.float64)
        radii = [r, r, r, r_hi, r_hi]
        for row, (got, want, radius) in enumerate(zip([floats[1], *floats[6:10]], triton_normals, radii)):
            assert np.all(np.abs(got - want) <= normal_bound(radius, 16)), \
                f"randn row {row}, {where}: max diff {np.max(np.abs(got - want))}"


def test_philox_and_uniform_match_recorded_triton():
    fixture = _fixture()
    for case in fixture["philox"]:
        counters = np.array(case["counters"], dtype=np.uint64).astype(np.uint32)
        got = run_philox(counters.view(np.int32), case["seed"])
        np.testing.assert_array_equal(got, np.array(case["out"], dtype=np.uint64).astype(np.uint32),
                                      err_msg=f"seed={case['seed']}")
    x = np.array(fixture["uniform"]["x"], dtype=np.int32)
    out = torch.full((x.size,), POISON_FLOAT)
    tlxc.interpret(uniform_kernel)[(cdiv(x.size, BLOCK),)](torch.from_numpy(x), out, x.size, BLOCK=BLOCK)
    np.testing.assert_array_equal(out.numpy(), np.array(fixture["uniform"]["out"], dtype=np.float32))


# -- 3. compiled code: sm_90a cubins, and the GPU against the interpreter -------------------

def _cubin(kernel, types: dict, constants: dict) -> str:
    compiled = compile_kernel(kernel, specialization_from_types(kernel, types, constants), arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "arith.umulhi" in compiled.asm["ir"]
    return compiled.asm["cuda"]


def test_sm90a_cubins():
    # A uint64 seed with int64 offsets (the widest path), and tl.philox on int32 counters.
    cuda = _cubin(streams_kernel, {"ints_ptr": PointerType(i32), "floats_ptr": PointerType(f32), "seed": u64,
                                   "offset_base": i64, "n": i32}, {"N_ROUNDS": 10, "BLOCK": BLOCK})
    assert "__umulhi(" in cuda and "logf(" in cuda and "cosf(" in cuda
    assert "__umulhi(" in _cubin(philox_kernel, {"counters_ptr": PointerType(i32), "out_ptr": PointerType(i32),
                                                 "seed": i32, "n": i32}, {"BLOCK": BLOCK})


GPU_CASES = STREAM_CASES + [(7, 2**40 + 3, 1000, 10), (0, 0, 5000, 10)]


@pytest.mark.gpu
@pytest.mark.parametrize("seed,base,n,rounds", GPU_CASES)
def test_gpu_streams_match_interpreter(seed, base, n, rounds):
    gpu_ints, gpu_floats = run_streams(seed, base, n, rounds, device="cuda")
    cpu_ints, cpu_floats = run_streams(seed, base, n, rounds)
    np.testing.assert_array_equal(gpu_ints, cpu_ints)
    np.testing.assert_array_equal(gpu_floats[[0, 2, 3, 4, 5]], cpu_floats[[0, 2, 3, 4, 5]])   # rand: exact
    uniforms = [uniform_ref(row) for row in cpu_ints[:4]]
    r, r_hi = normal_ref(uniforms[0], uniforms[1])[2], normal_ref(uniforms[2], uniforms[3])[2]
    for row, radius in zip((1, 6, 7, 8, 9), (r, r, r, r_hi, r_hi)):
        diff = np.abs(gpu_floats[row].astype(np.float64) - cpu_floats[row])
        assert np.all(diff <= normal_bound(radius, 8)), f"randn row {row}: max diff {diff.max()}"


@pytest.mark.gpu
def test_gpu_philox_matches_interpreter():
    rng = np.random.default_rng()
    counters = rng.integers(0, 2**32, size=(300, 4), dtype=np.uint64).astype(np.uint32).view(np.int32)
    for seed in (0, 2**64 - 1, 0x299F31D0A4093822):
        np.testing.assert_array_equal(run_philox(counters, seed, device="cuda"), run_philox(counters, seed))
    wide = rng.integers(-2**63, 2**63 - 1, size=(50, 4), dtype=np.int64)
    np.testing.assert_array_equal(run_philox(wide, 99, device="cuda"), run_philox(wide, 99))


@pytest.mark.gpu
def test_gpu_uniform_edges_match_interpreter():
    edges = np.array([0, 1, -1, 2**31 - 1, -2**31, 0x7FFFFF, 0x800000], dtype=np.int64)
    x = np.concatenate([edges, np.random.default_rng().integers(-2**31, 2**31, size=300)]).astype(np.int32)
    results = []
    for device in ("cuda", "cpu"):
        out = torch.full((x.size,), POISON_FLOAT, device=device)
        launcher = uniform_kernel if device == "cuda" else tlxc.interpret(uniform_kernel)
        launcher[(cdiv(x.size, BLOCK),)](torch.from_numpy(x).to(device), out, x.size, BLOCK=BLOCK)
        results.append(out.cpu().numpy())
    np.testing.assert_array_equal(results[0], results[1])
