"""Tensor memory as TLX's Blackwell attention kernels use it (issue 25): aliasing (``reuse=``
and a tmem ``storage_alias_spec``), 16-bit buffers packed two to a 32-bit column, [128, 1]
column buffers, and tcgen05 MMAs with A in tensor memory.  Interpreter semantics against
numpy/float64, the checker's alias findings, the frontend's refusals, and ptxas acceptance
of the generated PTX (NVRTC, sm_100a)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import kernels_tmem_alias as K  # noqa: E402

import tlxc  # noqa: E402
import tlxc.language as tl  # noqa: E402
from tlxc.check import ERROR  # noqa: E402
from tlxc.compiler import check_function, compile_kernel  # noqa: E402
from tlxc.errors import RaceError, TlxcError  # noqa: E402
from tlxc.frontend.specialize import specialization_from_types  # noqa: E402
from tlxc.interpreter import interpret  # noqa: E402
from tlxc.ir.ops.tcgen05 import place_tensor_memory  # noqa: E402
from tlxc.language import tlx  # noqa: E402


def _nvrtc_available() -> bool:
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except (ImportError, OSError, TlxcError):
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _nvrtc_available(), reason="NVRTC (cuda-bindings) is not available")


def _spec(kernel, **constexprs):
    return specialization_from_types(kernel, {}, constexprs)


def _compile(kernel, stages=("ir", "ir.opt", "cuda", "ptx", "cubin"), **constexprs):
    return compile_kernel(kernel, _spec(kernel, **constexprs), arch="sm_100a", num_warps=4, stages=stages)


def _errors(kernel, **constexprs):
    return [f for f in check_function(kernel, _spec(kernel, **constexprs), arch="sm_100a") if f.severity == ERROR]


# -- the interpreter ---------------------------------------------------------------------------------
def test_fp16_buffer_packs_two_elements_per_column():
    x = torch.randn(128, 64).half()
    out = torch.zeros(128, 32, dtype=torch.int32)
    interpret(K.pack_roundtrip, (1,), (x, out), arch="sm_100a")
    # word j of a row: element 2j in bits 0-15, element 2j + 1 in bits 16-31
    bits = x.view(torch.int16).numpy().astype(np.int64) & 0xFFFF
    expected = (bits[:, 0::2] | (bits[:, 1::2] << 16)).astype(np.uint32).view(np.int32)
    assert np.array_equal(out.numpy(), expected)


@pytest.mark.parametrize("spec", [True, False], ids=["storage_alias_spec", "reuse"])
def test_aliases_meet_the_columns_of_the_tile(spec):
    """P covers the tile's first 64 columns (fp16, packed), alpha and l the next two; the rest
    of the tile keeps its values.  Bit-exact through the fp32 view."""
    g = torch.Generator().manual_seed(1)
    tile = torch.randn(128, 128, generator=g)
    p = torch.randn(128, 128, generator=g).half()
    alpha, l_ = torch.randn(128, generator=g), torch.randn(128, generator=g)
    out = torch.full((128 * 128 + 128,), float("nan"))
    interpret(K.spec_overlap, (1,), (tile, p, alpha, l_, out), {"SPEC": spec}, arch="sm_100a")
    expected = tile.clone()
    expected[:, :64] = torch.from_numpy(p.numpy().view(np.float32))
    expected[:, 64], expected[:, 65] = alpha, l_
    assert torch.equal(out[:128 * 128].view(128, 128).view(torch.int32), expected.view(torch.int32))
    assert torch.equal(out[128 * 128:], alpha)          # a [128, 1] buffer reads back as it was stored


@pytest.mark.parametrize("seed", [None, 2])
def test_mma_with_a_in_tensor_memory(seed):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(128 if i == 0 else 64, 64, generator=g).half() for i in range(3))
    o = torch.full((128, 64), float("nan"))
    interpret(K.attention_step, (1,), (q, k, v, o), seed=seed, arch="sm_100a")
    p = (q.double() @ k.double().T).half().double()      # P is rounded to fp16 in tensor memory
    ref = p @ v.double()
    # S is summed in float32 before the rounding: an element of P may land one fp16 step
    # (2^-11 relative) from the float64 reference's
    assert ((o.double() - ref).abs().max() / ref.abs().max()).item() < 5e-4


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_interpreter_sees_a_store_through_an_alias_race_the_mma():
    q, k, v = torch.randn(128, 64).half(), torch.randn(64, 64).half(), torch.randn(64, 64).half()
    with pytest.raises(RaceError, match="tcgen05 MMA accumulator write"):
        interpret(K.attention_step, (1,), (q, k, v, torch.empty(128, 64)), {"BUG": "p_over_running_mma"},
                  arch="sm_100a")


def test_never_written_tensor_memory_reads_as_nan():
    """TMEM holds garbage before its first write: a load sees NaN there (not an error: TLX's
    attention kernels scale the not-yet-written accumulator by alpha = 0 and then overwrite it)."""
    @tlxc.kernel
    def k(out_ptr: tl.pointer_type(tl.float32)):
        buf = tlx.local_alloc((128, 32), tl.float32, 1, storage=tlx.storage_kind.tmem)
        rows = tl.arange(0, 128)
        tlx.local_store(tlx.local_slice(buf[0], [0, 0], [128, 16]), tl.zeros([128, 16], tl.float32) + 1.0)
        tl.store(out_ptr + rows[:, None] * 32 + tl.arange(0, 32)[None, :], tlx.local_load(buf[0]))

    out = torch.zeros(128, 32)
    interpret(k, (1,), (out,), arch="sm_100a")
    assert torch.equal(out[:, :16], torch.ones(128, 16))
    assert out[:, 16:].isnan().all()


# -- placement, the checker ----------------------------------------------------------------------
def test_placement_gives_aliases_the_columns_of_their_group():
    from tlxc.compiler import frontend
    module = frontend(K.attention_step, _spec(K.attention_step), arch="sm_100a")
    kernel = module.kernels[0]
    allocs = {op.results[0].name_hint: op for op in kernel.regions[0].ops
              if op.name == "tlx.local_alloc" and op.results[0].type.storage == "tmem"}
    columns, widths, total = place_tensor_memory(kernel)
    assert columns[id(allocs["s"])] == columns[id(allocs["p"])] == columns[id(allocs["side"])] == 0
    assert widths[id(allocs["s"])] == 128          # 'side': 128 one-column buffers
    assert columns[id(allocs["o"])] == 128 and total == 192


def test_checker_finds_a_store_through_an_alias_while_the_mma_writes():
    assert _errors(K.attention_step) == []
    errors = _errors(K.attention_step, BUG="p_over_running_mma")
    assert len(errors) == 1 and errors[0].message.startswith("race: task 'main' overwrites 's' (tensor memory "
                                                             "shared with p, side)")
    assert "tcgen05 MMA" in errors[0].message
    # the one-column alias past S's columns does not meet the MMA's accumulator
    assert _errors(K.attention_step, BUG="beside_running_mma") == []


# -- frontend refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, text", [
    ("smem_reuses_tmem", "'reuse' is a tmem allocation, but the new buffers are in shared memory"),
    ("tmem_reuses_smem", "'reuse' is a smem allocation, but the new buffers are in tensor memory"),
    ("spec_storage", "the storage_alias_spec is for tensor memory (tlx.storage_kind.tmem) but this allocation "
                     "is in shared memory"),
    ("spec_size", "not a multiple"),
    # the distinct group (64 + 1 columns) is wider than 'a' (64): 'a' cannot be indexed by the stride
    ("distinct_overflow", "units_between_buffer_groups (33280) must be a multiple of the original buffer size "
                          "(32768) of 'a'"),
    ("trans_a", "a tensor-memory A operand is read K-major"),
    ("b_in_tmem", "'B' must be a shared-memory buffer"),
])
def test_refusals(mode, text):
    @tlxc.kernel
    def k(MODE: tl.constexpr):
        if MODE == "smem_reuses_tmem":
            t = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
            tlx.local_alloc((128, 64), tl.float32, 1, reuse=t)
        if MODE == "tmem_reuses_smem":
            s = tlx.local_alloc((128, 64), tl.float32, 1)
            tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem, reuse=s)
        if MODE == "spec_storage":
            spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
            tlx.local_alloc((128, 64), tl.float32, 1, reuse=spec)
        if MODE == "spec_size":
            tlx.storage_alias_spec(storage=tlx.storage_kind.tmem, buffer_size_bytes=1000)
        if MODE == "distinct_overflow":
            spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
            a = tlx.local_alloc((128, 64), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
            b = tlx.local_alloc((128, 64), tl.float16, 1, tlx.storage_kind.tmem, reuse=spec)
            c = tlx.local_alloc((128, 64), tl.float16, 1, tlx.storage_kind.tmem, reuse=spec)
            d = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
            spec.set_buffer_overlap(tlx.reuse_group(a, tlx.reuse_group(b, c, d,
                                                                        group_type=tlx.reuse_group_type.distinct)))
        if MODE == "trans_a" or MODE == "b_in_tmem":
            acc = tlx.local_alloc((128, 64), tl.float32, 1, tlx.storage_kind.tmem)
            b = tlx.local_alloc((128, 64), tl.float16, 1)
            if MODE == "trans_a":
                sq = tlx.local_alloc((128, 128), tl.float16, 1, tlx.storage_kind.tmem)
                tlx.async_dot(tlx.local_trans(sq[0]), b[0], acc[0])
            else:
                a = tlx.local_alloc((128, 128), tl.float16, 1)
                bt = tlx.local_alloc((128, 64), tl.float16, 1, tlx.storage_kind.tmem)
                tlx.async_dot(a[0], bt[0], acc[0])

    with pytest.raises(TlxcError, match=re.escape(text)):
        compile_kernel(k, _spec(k, MODE=mode), arch="sm_100a", num_warps=4, stages=("ir",))


# -- ptxas (NVRTC) ----------------------------------------------------------------------------------
@needs_nvrtc
def test_attention_step_compiles_with_a_tensor_memory_a_operand():
    compiled = _compile(K.attention_step)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx = compiled.asm["ptx"]
    # S = Q @ K^T from shared memory; O = P @ V with P's TMEM address as A, 4 k-steps of 16
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+", ptx)
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+", ptx)) == 4
    cuda = compiled.asm["cuda"]
    assert "A in tensor memory, K-major" in cuda
    assert "tlx_tcgen05_st_32x32b_x32(" in cuda          # P: 64 fp16 per row = 32 columns
    assert "<< 16" in cuda                               # packed two to a word


@needs_nvrtc
@pytest.mark.parametrize("spec", [True, False], ids=["storage_alias_spec", "reuse"])
def test_column_buffers_compile(spec):
    compiled = _compile(K.spec_overlap, SPEC=spec)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "tcgen05.st.sync.aligned.32x32b.x1.b32" in compiled.asm["ptx"]
    assert "tcgen05.ld.sync.aligned.32x32b.x1.b32" in compiled.asm["ptx"]
    cuda = compiled.asm["cuda"]
    # every alias starts at the tile's column; the group takes the tile's 128 columns, no more
    assert "const unsigned alpha = tlx_tmem_base + 0u;" in cuda
    assert "tlx_tcgen05_dealloc(tlx_tmem_base, 128u)" in cuda


@needs_nvrtc
def test_fp16_pack_compiles():
    compiled = _compile(K.pack_roundtrip)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in compiled.asm["ptx"]
