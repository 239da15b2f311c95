"""``tl.randint``, ``tl.rand``, ``tl.randn`` and friends: Triton's counter-based Philox generator.

A seed and a tensor of offsets give the same numbers as Triton does for that seed and those
offsets: Philox-4x32 with 10 rounds by default (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC'11), keyed by the two 32-bit halves of the 64-bit seed, counting on
``(offset_lo, offset_hi, 0, 0)``.  Everything here is an ordinary ``@tlxc.kernel`` helper written
in ``tl.*``, inlined at each call, so the interpreter and the GPU run the same integer operations;
the integers are bit-exact everywhere, ``rand`` is exact too (one int→f32 conversion and one f32
multiply), and ``randn`` goes through ``tl.log``/``tl.sqrt``/``tl.cos``, whose last bits depend on
the target's libm (docs/language.md, "Random numbers").

The modules' names and signatures are Triton's (``triton/language/random.py``), so that a kernel
calling ``tl.rand(seed, offsets)`` ports unchanged.
"""
from __future__ import annotations

from ..runtime.jit import kernel
from . import core as tl

N_ROUNDS_DEFAULT = 10   # Philox-4x32-10, Triton's default

# Philox's Weyl key increments (golden ratio, sqrt(3) - 1) and round multipliers, for 32-bit
# and 64-bit counters (Salmon et al., table 2).
PHILOX_32 = (0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57)
PHILOX_64 = (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157)


@kernel
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """``n_rounds`` Philox rounds on the counter ``(c0, c1, c2, c3)`` with key ``(k0, k1)``,
    all of one unsigned type (uint32 or uint64)."""
    tl.static_assert(c0.dtype == tl.uint32 or c0.dtype == tl.uint64,
                     "philox_impl: the counter must be uint32 or uint64")
    KEYS: tl.constexpr = PHILOX_32 if c0.dtype == tl.uint32 else PHILOX_64
    # The constants are typed explicitly: a bare literal such as 0xD2511F53 would be an int64.
    key_a = tl.cast(KEYS[0], c0.dtype)
    key_b = tl.cast(KEYS[1], c0.dtype)
    round_a = tl.cast(KEYS[2], c0.dtype)
    round_b = tl.cast(KEYS[3], c0.dtype)
    for _ in tl.static_range(n_rounds):
        prev_c0, prev_c2 = c0, c2
        c0 = tl.umulhi(round_b, prev_c2) ^ c1 ^ k0
        c2 = tl.umulhi(round_a, prev_c0) ^ c3 ^ k1
        c1 = round_b * prev_c2           # the low halves: unsigned, wrapping
        c3 = round_a * prev_c0
        k0 = k0 + key_a
        k1 = k1 + key_b
    return c0, c1, c2, c3


@kernel
def philox(seed, c0, c1, c2, c3, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Philox on the counter ``(c0, c1, c2, c3)`` keyed by ``seed``: four uint32 tensors for a
    32-bit counter (key = the seed's low and high 32 bits), four uint64 for a 64-bit one
    (key = the seed, 0)."""
    seed = tl.to_tensor(seed)
    tl.static_assert(seed.dtype.is_integer, "philox: the seed must be an integer")
    seed = seed.to(tl.uint64)
    c0 = tl.to_tensor(c0)
    c1 = tl.to_tensor(c1)
    c2 = tl.to_tensor(c2)
    c3 = tl.to_tensor(c3)
    tl.static_assert(c0.dtype.bits == 32 or c0.dtype.bits == 64,
                     "philox: the counters must be 32-bit or 64-bit integers")
    if c0.dtype.bits == 32:
        int_dtype: tl.constexpr = tl.uint32
        seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
        seed_lo = (seed & 0xFFFFFFFF).to(tl.uint32)
    else:
        int_dtype: tl.constexpr = tl.uint64
        seed_hi = seed * 0
        seed_lo = seed
    c0 = c0.to(int_dtype, bitcast=True)
    c1 = c1.to(int_dtype, bitcast=True)
    c2 = c2.to(int_dtype, bitcast=True)
    c3 = c3.to(int_dtype, bitcast=True)
    return philox_impl(c0, c1, c2, c3, seed_lo, seed_hi, n_rounds)


@kernel
def randint4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four uint32 tensors of random bits for ``seed`` (an integer scalar) and each element of
    ``offset`` (an integer tensor; a 64-bit offset fills the counter's second word with its
    high half).  The cheapest way to several streams."""
    offset = tl.to_tensor(offset)
    tl.static_assert(offset.dtype.is_integer, "randint4x: the offsets must be integers")
    offset_lo = offset.to(tl.uint32)
    zero = offset_lo * 0
    if offset.dtype.bits > 32:
        offset_hi = (offset >> 32).to(tl.uint32)
    else:
        offset_hi = zero
    return philox(seed, offset_lo, offset_hi, zero, zero, n_rounds)


@kernel
def randint(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A uint32 tensor of random bits: the first of ``randint4x``'s four."""
    ret, _, _, _ = randint4x(seed, offset, n_rounds)
    return ret


@kernel
def uint_to_uniform_float(x):
    """Random 32- or 64-bit integers to float32 in ``[0, 1)``: the bits read as signed, folded
    onto ``[0, MAX]`` by ``x < 0 ? -x - 1 : x`` and scaled by the largest float that keeps
    ``MAX * scale`` below 1.0 after rounding."""
    if x.dtype == tl.uint32 or x.dtype == tl.int32:
        x = x.to(tl.int32, bitcast=True)
        scale = 4.6566127342e-10
    else:
        tl.static_assert(x.dtype == tl.uint64 or x.dtype == tl.int64,
                         "uint_to_uniform_float: needs 32- or 64-bit integers")
        x = x.to(tl.int64, bitcast=True)
        scale = 1.0842020432385337e-19
    x = tl.where(x < 0, -x - 1, x)
    return x * scale


@kernel
def rand(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A float32 tensor uniform in ``[0, 1)`` for ``seed`` and each element of ``offset``."""
    source = randint(seed, offset, n_rounds)
    return uint_to_uniform_float(source)


@kernel
def rand4x(seed, offsets, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four float32 tensors uniform in ``[0, 1)`` from one Philox evaluation."""
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return (uint_to_uniform_float(i1), uint_to_uniform_float(i2),
            uint_to_uniform_float(i3), uint_to_uniform_float(i4))


@kernel
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniforms in ``[0, 1)`` to two standard normals (``u1`` is clamped to
    1e-7 so that the logarithm stays finite)."""
    u1 = tl.maximum(1.0e-7, u1)
    th = 6.283185307179586 * u2
    r = tl.sqrt(-2.0 * tl.log(u1))
    return r * tl.cos(th), r * tl.sin(th)


@kernel
def randn(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """A float32 tensor of standard normals for ``seed`` and each element of ``offset``."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    u1 = uint_to_uniform_float(i1)
    u2 = uint_to_uniform_float(i2)
    n1, _ = pair_uniform_to_normal(u1, u2)
    return n1


@kernel
def randn4x(seed, offset, n_rounds: tl.constexpr = N_ROUNDS_DEFAULT):
    """Four float32 tensors of standard normals from one Philox evaluation."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4


__all__ = ["N_ROUNDS_DEFAULT", "pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x",
           "randint", "randint4x", "randn", "randn4x", "uint_to_uniform_float"]
