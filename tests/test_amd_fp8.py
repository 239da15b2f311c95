"""fp8 on AMD (issue 24): tlxc's fp8 types are OCP (float8e4nv = E4M3, float8e5 = E5M2); gfx950's fp8
MFMAs read OCP, gfx942's read FNUZ, so the target picks the helper (amdgcn.py: the gfx942 ones bridge
OCP to FNUZ).  The emulation decodes the MFMA operands per arch as the ISA documents say; here that
decoding is checked code by code against torch's own fp8 types, then tl.dot and conversions run on
the emulation of the generated HIP against torch."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_amdgcn import amdgcn, toolchain
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.codegen_amdgcn.prelude import PRELUDE
from tlxc.runtime.hip import emulate

pytestmark = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
ARCHS = ("gfx942", "gfx950")
# what each arch's MFMA reads, as torch spells the formats
MFMA_FORMATS = {"gfx942": (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz),
                "gfx950": (torch.float8_e4m3fn, torch.float8_e5m2)}


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(((got == want) | both_nan).all())


@pytest.mark.parametrize("arch", ARCHS)
def test_the_emulations_mfma_decoding_is_the_isas(arch):
    """All 256 codes of FP8 and BF8 as the emulation's MFMA reads them on ``arch`` (written from the
    CDNA3 / CDNA4 ISA documents) against torch's FNUZ (gfx942) or OCP (gfx950) formats."""
    module = emu.build('extern "C" double tlx_fp8_decoded(int code, int bf8) { return tlx_emu::fp8_value(code, bf8); }',
                       [], arch=arch)
    module.lib.tlx_fp8_decoded.restype = ctypes.c_double
    module.lib.tlx_fp8_decoded.argtypes = [ctypes.c_int, ctypes.c_int]
    codes = torch.arange(256, dtype=torch.uint8)
    for bf8, fmt in enumerate(MFMA_FORMATS[arch]):
        got = np.array([module.lib.tlx_fp8_decoded(c, bf8) for c in range(256)])
        assert _same(got, codes.view(fmt).double().numpy()), (arch, fmt)


CONVERSIONS = f"""
{PRELUDE}
{amdgcn.definitions(["tlx_workitem_id_x", "tlx_f8e4m3_to_f32", "tlx_f8e5m2_to_f32", "tlx_f32_to_f8"])}
extern "C" __global__ void decode(float* out) {{
  const int t = tlx_workitem_id_x();
  out[t] = tlx_f8e4m3_to_f32((unsigned char)t);
  out[256 + t] = tlx_f8e5m2_to_f32((unsigned char)t);
}}
extern "C" __global__ void encode(unsigned char* out, const float* x) {{
  const int t = tlx_workitem_id_x();
  for (int i = t; i < 4096; i += 256) {{ out[i] = tlx_f32_to_f8e4m3(x[i]); out[4096 + i] = tlx_f32_to_f8e5m2(x[i]); }}
}}
"""


def test_fp8_conversion_helpers():
    """OCP fp8 <-> f32 (plain C++, the same code on the GPU and here) against torch: every code
    decoded; f32 encoded round-to-nearest-even, saturating to the largest finite value, NaN kept."""
    module = emu.build(CONVERSIONS, ["decode", "encode"])
    out = torch.full((512,), 7.0)
    module.run("decode", [out], grid=(1,), threads=256)
    codes = torch.arange(256, dtype=torch.uint8)
    for i, fmt in enumerate((torch.float8_e4m3fn, torch.float8_e5m2)):
        assert _same(out[256 * i:256 * (i + 1)].double().numpy(), codes.view(fmt).double().numpy()), fmt
    x = torch.randn(4096) * torch.exp2(torch.randint(-20, 18, (4096,)).float())
    x[:8] = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e6, -500.0, 2.0 ** -30])
    enc = torch.zeros(8192, dtype=torch.uint8)
    module.run("encode", [enc, x], grid=(1,), threads=256)
    for i, (fmt, top) in enumerate(((torch.float8_e4m3fn, 448.0), (torch.float8_e5m2, 57344.0))):
        got = enc[4096 * i:4096 * (i + 1)].view(fmt).float()
        want = x.clamp(-top, top).to(fmt).float()      # torch rounds to nearest even; satfinite = clamp first
        assert _same(got.numpy(), want.numpy()), fmt


@tlxc.kernel
def fp8_dot_tile(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, c))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape, warps, a_type, b_type, instruction", [
    ((32, 64, 32), 2, torch.float8_e4m3fn, torch.float8_e4m3fn, "32x32x16_fp8_fp8"),
    ((16, 32, 64), 2, torch.float8_e5m2, torch.float8_e4m3fn, "16x16x32_bf8_fp8"),
    ((32, 32, 32), 1, torch.float8_e4m3fn, torch.float8_e5m2, "32x32x16_fp8_bf8")])
def test_fp8_dot_on_mfma(arch, shape, warps, a_type, b_type, instruction):
    """OCP fp8 operands, f32 accumulator: gfx950 runs its OCP MFMA, gfx942 the FNUZ one behind the
    bridge; both must give torch's product (the emulation decodes each arch's format from the ISA)."""
    bm, bn, bk = shape
    a = (torch.randn(bm, bk) * 8).to(a_type)
    b = (torch.randn(bk, bn) * 8).to(b_type)
    a.view(torch.uint8)[0, :3] = torch.tensor([0x80, 0x01, 0x7B], dtype=torch.uint8)   # -0, the smallest subnormal, a large code
    c = torch.randn(bm, bn)
    ref = a.double() @ b.double() + c.double()
    compiled = emulate(fp8_dot_tile, (1,), a, b, c, BM=bm, BN=bn, BK=bk, arch=arch, num_warps=warps,
                       code_object=toolchain.available())
    helper = f"tlx_mfma_f32_{instruction}" + ("_fnuz" if arch == "gfx942" else "")
    assert f"{helper}(" in compiled.asm["hip"]
    assert torch.allclose(c.double(), ref, rtol=1e-6, atol=1e-2), (c.double() - ref).abs().max()
    if toolchain.available():
        assert f"v_mfma_f32_{instruction}" in compiled.asm["amdgcn"]


@tlxc.kernel
def to_fp8_and_back(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x.to(tl.float8e4nv), mask=mask)
    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=mask).to(tl.float32) * 2.0, mask=mask)


@pytest.mark.parametrize("arch", ARCHS)
def test_fp8_loads_stores_and_conversions(arch):
    n = 1000
    x = torch.randn(n) * 30
    y = torch.zeros(n, dtype=torch.float8_e4m3fn)
    out = torch.full((n,), float("nan"))
    emulate(to_fp8_and_back, (4,), x, y, out, n, BLOCK=256, arch=arch)
    want = x.to(torch.float8_e4m3fn)
    assert torch.equal(y.view(torch.uint8), want.view(torch.uint8))
    assert torch.equal(out, want.float() * 2)


def _fp8_mfma_kernel(name):
    _builtin, acc, m, k, _fa, _fb, _archs = amdgcn.FP8_MFMA[name]
    regs = m * m // 64
    row = "8 * (r / 4) + 4 * (l / 32) + r % 4" if m == 32 else "4 * (l / 16) + r"
    return f"""
extern "C" __global__ void k_{name}(float* d, const unsigned char* a, const unsigned char* b, const float* c) {{
  const int l = tlx_workitem_id_x() & 63;
  tlx_u8x8 av, bv;
  {acc} cv;
  for (int e = 0; e < 8; ++e) {{ av[e] = a[(l % {m}) * {k} + 8 * (l / {m}) + e]; bv[e] = b[(8 * (l / {m}) + e) * {m} + l % {m}]; }}
  for (int r = 0; r < {regs}; ++r) cv[r] = c[({row}) * {m} + l % {m}];
  {acc} dv = {name}(av, bv, cv);
  for (int r = 0; r < {regs}; ++r) d[({row}) * {m} + l % {m}] = dv[r];
}}"""


def _fp8_mfma_source(names):
    return PRELUDE + "\n" + amdgcn.definitions(["tlx_workitem_id_x", *names]) + "".join(map(_fp8_mfma_kernel, names))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_fp8_mfma_helper(arch):
    """Each fp8 MFMA helper of ``arch`` on OCP operands for one wave, against torch; then (with the
    offline toolchain) its instruction in the code object."""
    names = [n for n, spec in amdgcn.FP8_MFMA.items() if arch in spec[-1]]
    assert len(names) == 8
    module = emu.build(_fp8_mfma_source(names), [f"k_{n}" for n in names], arch=arch)
    fmt = {"fp8": torch.float8_e4m3fn, "bf8": torch.float8_e5m2}
    for name in names:
        _builtin, _acc, m, k, fa, fb, _archs = amdgcn.FP8_MFMA[name]
        a, b = (torch.randn(m, k) * 4).to(fmt[fa]), (torch.randn(k, m) * 4).to(fmt[fb])
        c, d = torch.randn(m, m), torch.full((m, m), float("nan"))
        module.run(f"k_{name}", [d, a.view(torch.uint8), b.view(torch.uint8), c], grid=(1,), threads=64)
        ref = a.double() @ b.double() + c.double()
        assert torch.allclose(d.double(), ref, rtol=1e-6, atol=1e-3), (name, (d.double() - ref).abs().max())
    if toolchain.available():
        compiled = toolchain.compile_hip(_fp8_mfma_source(names), arch, [f"k_{n}" for n in names])
        toolchain.check_code_object(compiled, expect=[f"v_mfma_f32_{s[2]}x{s[2]}x{s[3]}_{s[4]}_{s[5]}"
                                                      for s in (amdgcn.FP8_MFMA[n] for n in names)])
