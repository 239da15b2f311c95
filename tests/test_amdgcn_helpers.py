"""Every AMDGCN helper (codegen_amdgcn/amdgcn.py): what it computes, run on the CPU emulation
(the builtins as the ISA documents define them, emu/tlx_hip_emu.h), and that it compiles to its
instruction for gfx942 and gfx950 (the offline toolchain)."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from tlxc.codegen_amdgcn import amdgcn, toolchain
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.codegen_amdgcn.prelude import PRELUDE

pytestmark = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
THREADS = 128          # two waves
rng = np.random.default_rng()


def source(bodies: dict[str, str], helpers, params="unsigned* out, const unsigned* in") -> str:
    kernels = "".join(f'\nextern "C" __global__ void {name}({params}) {{\n  const int t = tlx_workitem_id_x();\n'
                      f'  const int lane = t & 63;\n  (void)lane;\n{body}\n}}\n' for name, body in bodies.items())
    return PRELUDE + "\n" + amdgcn.definitions(["tlx_workitem_id_x", *helpers]) + kernels


_BODIES: dict[str, str] = {}      # every probe of this file, compiled once into one emulated module


def probe(body: str) -> str:
    name = f"probe{len(_BODIES)}"
    _BODIES[name] = body
    return name


@functools.cache
def module():
    return emu.build(source(_BODIES, list(amdgcn.HELPERS)), list(_BODIES))


def run(name, *, threads=THREADS, grid=(1,), n_out=None, inputs=None):
    inputs = rng.integers(0, 2**32, THREADS, dtype=np.uint32) if inputs is None else inputs
    out = np.full(n_out or threads, 0xDEADBEEF, dtype=np.uint32)
    module().run(name, [out, inputs], grid=grid, threads=threads)
    return out, inputs


LANE = np.arange(THREADS) % 64
WAVE_BASE = np.arange(THREADS) // 64 * 64

IDS = probe("  const int g = (tlx_workgroup_id_z() * 3 + tlx_workgroup_id_y()) * 2 + tlx_workgroup_id_x();\n"
            "  out[g * 128 + t] = tlx_workgroup_id_x() | tlx_workgroup_id_y() << 4 | tlx_workgroup_id_z() << 8"
            " | tlx_num_workgroups(0) << 12 | tlx_num_workgroups(1) << 16 | tlx_num_workgroups(2) << 20"
            " | (unsigned)t << 24;")


def test_ids_and_grid_size():
    out, _ = run(IDS, grid=(2, 3, 2), n_out=12 * 128)
    g = np.arange(12 * 128) // 128
    x, y, z, t = g % 2, g // 2 % 3, g // 6, np.arange(12 * 128) % 128
    assert (out == (x | y << 4 | z << 8 | 2 << 12 | 3 << 16 | 2 << 20 | t << 24)).all()


BARRIER = {sync: probe(f"  __shared__ unsigned buf[128];\n  buf[t] = in[t];\n  {sync}();\n"
                       "  out[t] = buf[127 - t];\n  tlx_s_setprio<2>();\n  tlx_sched_barrier<0>();")
           for sync in ("tlx_syncthreads", "tlx_s_barrier")}
NO_BARRIER = probe("  __shared__ unsigned buf2[128];\n  buf2[t] = in[t];\n  out[t] = buf2[127 - t];")


@pytest.mark.parametrize("sync", BARRIER)
def test_barriers_order_lds(sync):
    # each work-item reads what another wrote before the barrier
    out, x = run(BARRIER[sync])
    assert (out == x[::-1]).all()
    out, x = run(NO_BARRIER)          # without one, the emulation (work-items in turn) reads stale LDS
    assert not (out == x[::-1]).all()


FIRST = probe("  out[t] = (unsigned)tlx_readfirstlane((int)in[t]);")
LANE5 = probe("  out[t] = (unsigned)tlx_readlane((int)in[t], 5);")
BALLOT = probe("  unsigned long long b = tlx_ballot(in[t] & 1);\n  out[t] = (unsigned)(b >> (t & 32));")


def test_readfirstlane_readlane_ballot():
    out, x = run(FIRST)
    assert (out == x[WAVE_BASE]).all()
    out, x = run(LANE5)
    assert (out == x[WAVE_BASE + 5]).all()
    out, x = run(BALLOT)
    bits = (x & 1).astype(np.uint64)
    masks = [int(sum(int(bits[w * 64 + l]) << l for l in range(64))) for w in range(2)]
    want = [(masks[i // 64] >> (i & 32)) & 0xFFFFFFFF for i in range(THREADS)]
    assert (out == np.array(want, dtype=np.uint32)).all()


BPERMUTE = probe("  out[t] = tlx_ds_bpermute((lane * 7 + 3) & 63, in[t]);")


def test_ds_bpermute_reads_any_lane():
    out, x = run(BPERMUTE)
    assert (out == x[WAVE_BASE + (LANE * 7 + 3) % 64]).all()


SWIZZLE_PATTERN = (5 << 10) | (2 << 5) | 0x1C
SWIZZLE_QUAD = 0x8000 | (3 | 2 << 2 | 1 << 4 | 0 << 6)         # reverse each quad
SWIZZLE = probe(f"  out[t] = tlx_ds_swizzle<{SWIZZLE_PATTERN}>(in[t]);")
SWIZZLE_Q = probe(f"  out[t] = tlx_ds_swizzle<{SWIZZLE_QUAD}>(in[t]);")


def test_ds_swizzle_modes():
    # bit-mask mode: ((lane & and) | or) ^ xor within 32 lanes; QDMode (bit 15): a quad permutation
    out, x = run(SWIZZLE)
    src = (LANE & 32) | (((LANE & 31) & 0x1C) | 2) ^ 5
    assert (out == x[WAVE_BASE + src]).all()
    out, x = run(SWIZZLE_Q)
    assert (out == x[(np.arange(THREADS) & ~3) | (3 - (LANE & 3))]).all()


DPP_CASES = [
    (amdgcn.DPP_QUAD_XOR1, lambda l: l ^ 1),
    (amdgcn.DPP_QUAD_XOR2, lambda l: l ^ 2),
    (amdgcn.DPP_ROW_ROR8, lambda l: (l & ~15) | ((l + 8) & 15)),
    (0x121, lambda l: (l & ~15) | ((l + 1) & 15)),                       # row_ror:1
    (0x140, lambda l: (l & ~15) | (15 - (l & 15))),                      # row_mirror
]
DPP = {ctrl: probe(f"  out[t] = tlx_dpp<{ctrl}>(in[t]);") for ctrl, _ in DPP_CASES}
DPP_SHL = probe("  out[t] = tlx_dpp<0x101>(in[t]);")


@pytest.mark.parametrize("ctrl, source_lane", DPP_CASES)
def test_dpp(ctrl, source_lane):
    out, x = run(DPP[ctrl])
    assert (out == x[WAVE_BASE + source_lane(LANE)]).all()


def test_dpp_row_shift_without_source_gives_zero():
    out, x = run(DPP_SHL)       # row_shl:1: lane 15 of a row has no source
    want = np.where((LANE & 15) == 15, 0, x[np.minimum(np.arange(THREADS) + 1, THREADS - 1)])
    assert (out == want).all()


MASKS = [1, 2, 4, 8, 16, 32, 5, 63]
SHFL = {m: (probe(f"  out[t] = tlx_shfl_xor<{m}>(in[t]);"),
            probe(f"  float f = __uint_as_float(in[t]); out[t] = __float_as_uint(tlx_shfl_xor<{m}>(f));"),
            probe(f"  long long v = ((long long)in[t] << 32) | in[127 - t];\n"
                  f"  long long w = tlx_shfl_xor<{m}>(v);\n  out[t] = (unsigned)(w >> 32) ^ (unsigned)w;"))
        for m in MASKS}


@pytest.mark.parametrize("mask", MASKS)
def test_shfl_xor(mask):
    as_int, as_float, as_i64 = SHFL[mask]
    src = WAVE_BASE + (LANE ^ mask)
    out, x = run(as_int)
    assert (out == x[src]).all()
    out, x = run(as_float, inputs=rng.standard_normal(THREADS).astype(np.float32).view(np.uint32))
    assert (out == x[src]).all()
    out, x = run(as_i64)
    assert (out == (x[src] ^ x[::-1][src])).all()


TO_SMALL = probe("  float v = __uint_as_float(in[t]);\n"
                 "  out[t] = tlx_f32_to_bf16(v) | (unsigned)tlx_f32_to_f16(v) << 16;")
FROM_SMALL = probe("  out[t] = __float_as_uint(tlx_f16_to_f32(in[t] & 0xffff) + 4.0f * tlx_bf16_to_f32(in[t] >> 16));")


def test_float_conversions_round_to_nearest_even():
    values = torch.cat([torch.randn(THREADS - 4) * 100, torch.tensor([float("inf"), float("nan"), 1e-30, -0.0])])
    out, _ = run(TO_SMALL, inputs=values.numpy().astype(np.float32).view(np.uint32))
    bf16 = torch.from_numpy((out & 0xFFFF).astype(np.uint16).view(np.int16)).view(torch.bfloat16)
    f16 = torch.from_numpy((out >> 16).astype(np.uint16).view(np.int16)).view(torch.float16)
    keep = torch.ones(THREADS, dtype=torch.bool)
    keep[-3] = False
    assert torch.equal(bf16[keep], values[keep].to(torch.bfloat16)) and torch.isnan(bf16[-3])
    assert torch.equal(f16[keep], values[keep].to(torch.float16)) and torch.isnan(f16[-3])
    halves = torch.randn(THREADS).to(torch.float16)
    low = halves.view(torch.int16).numpy().view(np.uint16).astype(np.uint32)
    high = halves.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).astype(np.uint32)
    out, _ = run(FROM_SMALL, inputs=low | high << 16)
    want = halves.float() + 4.0 * halves.to(torch.bfloat16).float()
    assert torch.equal(torch.from_numpy(out.view(np.float32)), want)


def _vector_body(bits):
    words = bits // 32
    names = ", ".join(f"w{k}" for k in range(words))
    return (f"  unsigned {', '.join(f'w{k} = 7' for k in range(words))};\n"
            f"  const int base = (t / {words}) * {words};\n"
            f"  if (t % {words} == 0) {{ tlx_ld_global_b{bits}(in + base, (t / {words}) % 3 != 1, {names});\n"
            f"    tlx_st_global_b{bits}(out + base, (t / {words}) % 5 != 2, {names}); }}")


VECTOR = {bits: probe(_vector_body(bits)) for bits in (32, 64, 128)}


@pytest.mark.parametrize("bits", VECTOR)
def test_global_vector_access(bits):
    out, x = run(VECTOR[bits])
    group = np.arange(THREADS) // (bits // 32)
    want = np.where(group % 3 != 1, x, 7).astype(np.uint32)
    want = np.where(group % 5 != 2, want, 0xDEADBEEF).astype(np.uint32)
    assert (out == want).all()



def _lds_body(bits):
    words = bits // 32
    names = ", ".join(f"w{k}" for k in range(words))
    return (f"  __shared__ __attribute__((aligned(16))) unsigned lds{bits}[128];\n"
            f"  const int base = (t / {words}) * {words};\n"
            f"  unsigned {', '.join(f'w{k} = in[base + {k}]' for k in range(words))};\n"
            f"  if (t % {words} == 0) tlx_st_lds_b{bits}(lds{bits} + base, {names});\n"
            f"  tlx_syncthreads();\n"
            f"  const int other = 127 - t;\n"
            f"  if (t % {words} == 0) {{ tlx_ld_lds_b{bits}(lds{bits} + (128 - {words} - base), {names});\n"
            f"    {' '.join(f'out[base + {k}] = w{k};' for k in range(words))} }}\n  (void)other;")


LDS = {bits: probe(_lds_body(bits)) for bits in (32, 64, 128)}


@pytest.mark.parametrize("bits", LDS)
def test_lds_vector_access(bits):
    """Each group of ``bits`` stores to LDS, then reads the group mirrored across the work-group."""
    out, x = run(LDS[bits])
    words = bits // 32
    groups = x.reshape(-1, words)[::-1].reshape(-1)
    assert (out == groups).all()



LDS_DMA = probe("  __shared__ __attribute__((aligned(16))) unsigned dma[512];\n"
                "  const int w = t >> 6;\n"
                "  tlx_global_load_lds_b128((lane & 1) ? (const void*)(in + 4 * (t & 31)) : (const void*)tlx_zero16,\n"
                "                           (unsigned char*)dma + 1024 * w);\n"
                "  tlx_s_waitcnt_vmcnt0();\n  tlx_syncthreads();\n"
                "  for (int j = 0; j < 4; ++j) out[4 * t + j] = dma[4 * t + j];")
LDS_DMA_SKEWED = probe("  __shared__ __attribute__((aligned(16))) unsigned dma2[512];\n"
                       "  tlx_global_load_lds_b128(in, (unsigned char*)dma2 + 16 * lane);")


def test_global_load_lds_lands_at_the_waves_base_plus_16_per_lane():
    out, x = run(LDS_DMA, n_out=4 * THREADS)
    lanes = np.arange(THREADS) % 64
    want = np.where((lanes % 2 == 1)[:, None], x[(4 * (np.arange(THREADS) % 32))[:, None] + np.arange(4)], 0)
    assert (out.reshape(THREADS, 4) == want).all()
    with pytest.raises(emu.EmulationError, match="must be wave-uniform"):
        run(LDS_DMA_SKEWED)



BARRIER_WAIT = probe("  __shared__ unsigned bar[2], slot[1];\n"
                     "  if (t == 0) tlx_lds_barrier_init(bar, 2u);\n  tlx_syncthreads();\n"
                     "  if (t == 127) { slot[0] = in[5]; tlx_lds_barrier_arrive(bar, 1u); }\n"
                     "  if (t == 64) tlx_lds_barrier_arrive(bar, 1u);\n"
                     "  tlx_lds_barrier_wait(bar, 0u);       // phase 0 completes with both arrivals\n"
                     "  out[t] = slot[0] + (bar[0] >> 31);")


def test_lds_barrier_waits_for_every_arrival():
    out, x = run(BARRIER_WAIT)
    assert (out == x[5] + 1).all()      # every work-item saw the value and the flipped parity


TESTED = {"tlx_workitem_id_x", "tlx_workgroup_id_x", "tlx_workgroup_id_y", "tlx_workgroup_id_z", "tlx_num_workgroups",
          "tlx_s_barrier", "tlx_fence_workgroup", "tlx_syncthreads", "tlx_s_setprio", "tlx_sched_barrier",
          "tlx_readfirstlane", "tlx_readlane", "tlx_ballot", "tlx_ds_bpermute", "tlx_ds_swizzle", "tlx_dpp",
          "tlx_shfl_xor", "tlx_f16_to_f32", "tlx_f32_to_f16", "tlx_bf16_to_f32", "tlx_f32_to_bf16",
          *(f"tlx_{op}_global_b{b}" for op in ("ld", "st") for b in (32, 64, 128)),
          *(f"tlx_{op}_lds_b{b}" for op in ("ld", "st") for b in (32, 64, 128)),
          "tlx_mfma_types", *amdgcn.MFMA, "tlx_global_load_lds_b128", "tlx_zero16", "tlx_s_waitcnt_vmcnt0",
          "tlx_s_sleep", "tlx_lds_barrier",
          # fp8: tests/test_amd_fp8.py (emulation against torch, instructions in the code objects)
          "tlx_fp8_ocp_as_fnuz", *amdgcn.FP8_MFMA, "tlx_f8e4m3_to_f32", "tlx_f8e5m2_to_f32", "tlx_f32_to_f8",
          # float -> integer: tests/test_float_to_int_casts.py (the HIP text on the emulation, every width)
          *(f"tlx_cvt_rzi_{d}_{s}" for d in ("s32", "u32", "s64", "u64") for s in ("f32", "f64"))}


def test_every_helper_is_tested_here():
    assert set(amdgcn.HELPERS) == TESTED, set(amdgcn.HELPERS) ^ TESTED


DEVICE_BODY = """
  __shared__ unsigned buf[256];
  unsigned a, b, c, d;
  tlx_ld_global_b128(in + 4 * t, true, a, b, c, d);
  buf[t] = a + tlx_readlane((int)b, 3) + tlx_readfirstlane((int)c) + (unsigned)tlx_ballot(d & 1);
  tlx_syncthreads();
  tlx_s_setprio<1>();
  tlx_sched_barrier<0>();
  unsigned v = buf[255 - t] + tlx_num_workgroups(0) + tlx_workgroup_id_x() + tlx_workgroup_id_y() + tlx_workgroup_id_z();
  v += tlx_ds_bpermute(lane ^ 7, v) + tlx_ds_swizzle<0x8000 | 0x1b>(v) + tlx_dpp<0x140>(v) + tlx_shfl_xor<16>(v);
  v += tlx_f32_to_bf16(tlx_f16_to_f32((unsigned short)v)) + tlx_f32_to_f16(tlx_bf16_to_f32((unsigned short)a));
  tlx_s_barrier();
  __shared__ unsigned lbar[2];
  if (t == 0) tlx_lds_barrier_init(lbar, 1u);
  tlx_syncthreads();
  if (t == 0) tlx_lds_barrier_arrive(lbar, 1u);
  tlx_lds_barrier_wait(lbar, 0u);
  tlx_st_global_b128(out + 4 * t, true, v, a, b, c);
  tlx_st_global_b64(out + 2 * t, v & 1, v, a);
  unsigned e;
  tlx_ld_global_b32(in + t, true, e); tlx_ld_global_b64(in + t, true, a, b);
  tlx_st_global_b32(out + t, true, e + a + b);
  __shared__ __attribute__((aligned(16))) unsigned vbuf[1024];
  tlx_st_lds_b128(vbuf + 4 * t, v, a, b, c); tlx_st_lds_b64(vbuf + 2 * t, a, b); tlx_st_lds_b32(vbuf + t, e);
  tlx_syncthreads();
  tlx_ld_lds_b128(vbuf + 4 * (255 - t), v, a, b, c); tlx_ld_lds_b64(vbuf + 2 * (255 - t), e, b);
  tlx_ld_lds_b32(vbuf + (t ^ 1), d);
  tlx_st_global_b128(out + 4 * t + 1024, true, v + d, a, b, c + e);"""


@pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
@pytest.mark.parametrize("arch", toolchain.AMD_ARCHS)
def test_helpers_compile_to_their_instructions(arch):
    compiled = toolchain.compile_hip(source({"probe": DEVICE_BODY}, amdgcn.available_on(arch)), arch, ["probe"])
    toolchain.check_code_object(compiled, expect=[
        "v_readlane_b32", "v_readfirstlane_b32", "ds_bpermute_b32", "ds_swizzle_b32", r"v_\w+_dpp", "s_barrier",
        "s_setprio", "global_load_dwordx4", "global_store_dwordx4", "global_store_dwordx2", r"v_cvt_f32_f16\w*",
        r"v_cvt_f16_f32\w*", r"s_load_dword\w*", "ds_write_b128", "ds_read_b128", r"ds_read_b64|ds_read2_b32",
        "s_sleep", r"ds_add_rtn_u32|ds_add_u32|flat_atomic_add\w*"])


def _mfma_kernel(name):
    _builtin, ab, acc, m, n, k, _archs = amdgcn.MFMA[name]
    per_lane, regs = k * m // 64, m * n // 64
    row = "8 * (r / 4) + 4 * (l / 32) + r % 4" if m == 32 else "4 * (l / 16) + r"
    return f"""
extern "C" __global__ void k_{name}(float* d, const unsigned short* a, const unsigned short* b, const float* c) {{
  const int l = tlx_workitem_id_x() & 63;
  {ab} av, bv;
  {acc} cv;
  for (int e = 0; e < {per_lane}; ++e) {{
    unsigned short abits = a[(l % {m}) * {k} + {per_lane} * (l / {m}) + e];
    unsigned short bbits = b[({per_lane} * (l / {n}) + e) * {n} + l % {n}];
    {"av[e] = (short)abits; bv[e] = (short)bbits;" if "bf16" in name else
     "av[e] = __builtin_bit_cast(_Float16, abits); bv[e] = __builtin_bit_cast(_Float16, bbits);"}
  }}
  for (int r = 0; r < {regs}; ++r) cv[r] = c[({row}) * {n} + l % {n}];
  {acc} dv = {name}(av, bv, cv);
  for (int r = 0; r < {regs}; ++r) d[({row}) * {n} + l % {n}] = dv[r];
}}"""


def mfma_source(names):
    return PRELUDE + "\n" + amdgcn.definitions(["tlx_workitem_id_x", *names]) + "".join(map(_mfma_kernel, names))


@functools.cache
def mfma_module():
    return emu.build(mfma_source(list(amdgcn.MFMA)), [f"k_{n}" for n in amdgcn.MFMA])


@pytest.mark.parametrize("name", amdgcn.MFMA)
def test_mfma_on_the_emulation(name):
    """D = A @ B + C for one wave, operands placed as the ISA lays them out."""
    *_, m, n, k, _archs = amdgcn.MFMA[name]
    dtype = torch.bfloat16 if "bf16" in name else torch.float16
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    c = torch.randn(m, n)
    d = torch.full((m, n), float("nan"))
    bits = lambda t: t.contiguous().view(torch.int16).numpy().view(np.uint16)
    mfma_module().run(f"k_{name}", [d, bits(a), bits(b), c], grid=(1,), threads=64)
    ref = a.double() @ b.double() + c.double()
    assert torch.allclose(d.double(), ref, rtol=1e-6, atol=1e-5), (d - ref).abs().max()


@pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
@pytest.mark.parametrize("arch", toolchain.AMD_ARCHS)
def test_mfma_helpers_compile_where_the_arch_has_them(arch):
    names = [n for n, spec in amdgcn.MFMA.items() if arch in spec[-1]]
    compiled = toolchain.compile_hip(mfma_source(names), arch, [f"k_{n}" for n in names])
    toolchain.check_code_object(compiled, expect=[n.replace("tlx_", "v_") for n in names])
    for name in set(amdgcn.MFMA) - set(names):          # a gfx950 MFMA on gfx942: refused
        with pytest.raises(toolchain.InternalCompilerError, match="gfx950-insts"):
            toolchain.compile_hip(mfma_source([name]), arch, [f"k_{name}"])


@pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
def test_direct_to_lds_is_gfx950_only():
    body = {"probe": _BODIES[LDS_DMA]}
    compiled = toolchain.compile_hip(source(body, amdgcn.available_on("gfx950")), "gfx950", ["probe"])
    toolchain.check_code_object(compiled, expect=["global_load_lds_dwordx4", "s_waitcnt"])
    assert "tlx_global_load_lds_b128" not in amdgcn.available_on("gfx942")
    with pytest.raises(toolchain.InternalCompilerError, match="(?s)invalid size"):
        toolchain.compile_hip(source(body, list(amdgcn.HELPERS)), "gfx942", ["probe"])
