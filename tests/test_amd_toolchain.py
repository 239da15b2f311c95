"""The offline AMD toolchain (codegen_amdgcn/toolchain.py): HIP -> code object for gfx942 and
gfx950 without ROCm, and the code-object checks (target, LDS limit, no scratch, instruction classes)."""
from __future__ import annotations

import pytest

from tlxc.codegen_amdgcn import toolchain as tc
from tlxc.errors import InternalCompilerError

pytestmark = pytest.mark.skipif(not tc.available(), reason="the offline AMD toolchain (ziglang) is not installed")

PRELUDE = """
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
typedef _Float16 h4 __attribute__((ext_vector_type(4)));
typedef float f16v __attribute__((ext_vector_type(16)));
"""

KERNEL = PRELUDE + """
extern "C" __global__ void __attribute__((amdgpu_flat_work_group_size(1, 256)))
probe(float* out, const _Float16* a, int n) {
  __shared__ float buf[LDS_FLOATS];
  int t = __builtin_amdgcn_workitem_id_x();
  buf[t] = a[t];
  __builtin_amdgcn_s_setprio(1);
  __builtin_amdgcn_s_barrier();
  h4 x = {a[t], a[t + 1], a[t + 2], a[t + 3]};
  f16v acc = {};
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(x, x, acc, 0, 0, 0);
  if (t < n) out[t] = buf[255 - t] + acc[0];
}
"""


@pytest.mark.parametrize("arch", tc.AMD_ARCHS)
def test_code_object_for_each_arch(arch):
    compiled = tc.compile_hip(KERNEL.replace("LDS_FLOATS", "256"), arch, ["probe"])
    summary = tc.check_code_object(compiled, expect=[r"v_mfma_f32_32x32x8_?f16", "s_setprio", "s_barrier",
                                                     r"ds_(write|read)\w*"], forbid=[r"scratch_\w+"])
    res = summary["resources"]["probe"]
    assert res["lds_bytes"] == 1024 and res["scratch_bytes"] == 0 and res["wavefront_size"] == 64
    assert res["max_workgroup_size"] == 256
    # the kernel arguments as the kernarg segment lays them out (the launcher's packing is checked against this)
    assert [(a["offset"], a["size"], a["value_kind"]) for a in res["args"]][:3] == [
        (0, 8, "global_buffer"), (8, 8, "global_buffer"), (16, 4, "by_value")]
    header = tc.elf_header(compiled.code_object)
    assert header["flags"] & 0xFF == tc.EF_AMDGPU_MACH[arch]
    assert "clang version" in tc.clang_version()


def test_lds_limit_differs_per_arch():
    # 96 KiB of LDS: within gfx950's 160 KiB, over gfx942's 64 KiB (the compiler itself refuses it there)
    source = KERNEL.replace("LDS_FLOATS", str(96 * 1024 // 4))
    tc.check_code_object(tc.compile_hip(source, "gfx950", ["probe"]))
    with pytest.raises(InternalCompilerError, match="local memory"):
        tc.compile_hip(source, "gfx942", ["probe"])


def test_checks_fail_on_a_wrong_code_object():
    compiled = tc.compile_hip(KERNEL.replace("LDS_FLOATS", "256"), "gfx942", ["probe"])
    with pytest.raises(tc.CodeObjectError, match="no instruction matching"):
        tc.check_code_object(compiled, expect=["global_load_lds_dwordx4"])
    with pytest.raises(tc.CodeObjectError, match="forbidden"):
        tc.check_code_object(compiled, forbid=["s_setprio"])
    compiled.resources["probe"]["lds_bytes"] = 70000
    compiled.resources["probe"]["vgpr_spills"] = 3
    with pytest.raises(tc.CodeObjectError, match="over gfx942's 65536") as info:
        tc.check_code_object(compiled)
    assert "spills 3 VGPR" in str(info.value)
    compiled.arch = "gfx950"          # a gfx942 object checked as gfx950: the machine and the note disagree
    compiled.resources["probe"].update(lds_bytes=0, vgpr_spills=0)
    with pytest.raises(tc.CodeObjectError, match="is not gfx950"):
        tc.check_code_object(compiled)


def test_gfx950_only_instructions_are_rejected_on_gfx942():
    asm_kernel = PRELUDE + """
extern "C" __global__ void probe(float* out) {
  asm volatile("ds_read_b64_tr_b16 v[0:1], v2" ::: "v0", "v1", "v2");
}
"""
    tc.check_code_object(tc.compile_hip(asm_kernel, "gfx950", ["probe"]), expect=["ds_read_b64_tr_b16"])
    with pytest.raises(InternalCompilerError, match="(?s)assembler step.*not supported on this GPU"):
        tc.compile_hip(asm_kernel, "gfx942", ["probe"])


def test_missing_kernel_is_a_tlxc_bug():
    with pytest.raises(InternalCompilerError, match="not in the code object"):
        tc.compile_hip(KERNEL.replace("LDS_FLOATS", "256"), "gfx942", ["other"])
