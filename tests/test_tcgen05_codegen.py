"""tcgen05 / tensor memory lowering (sm_100a), without a GPU.

Each kernel below is compiled by NVRTC for sm_100a, so ptxas checks every
tcgen05 instruction (alloc, mma of the three kinds, commit, ld/st, waits,
fences); the tests look for the key PTX in the generated CUDA and check the
descriptor bit packing against the PTX ISA tables.  None of this has run on
a GPU (docs/codegen.md, "Blackwell tcgen05").
"""
from __future__ import annotations

import re

import pytest

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.rules_tcgen05 import _chunks, descriptor_fields, instruction_descriptor
from tlxc.compiler import compile_kernel, frontend, optimize
from tlxc.errors import CompilationError, TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir import types as T
from tlxc.language import tlx

BM, BK = 128, 64


def _nvrtc_available() -> bool:
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except (ImportError, OSError, TlxcError):
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _nvrtc_available(), reason="NVRTC (cuda-bindings) is not available")


# -- kernels --------------------------------------------------------------------------------------
@tlxc.kernel
def ws_gemm(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [128, 64], swizzle=128),
            b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
            c_ptr: tl.pointer_type(tl.float32), M: tl.int32, N: tl.int32, K: tl.int32,
            BN: tl.constexpr = 128):
    """The warp-specialized GEMM: TMA producer (1 warp), MMA issuer (1 warp), epilogue
    (the default task): B is [BK, BN] row-major (N-major), filled by 64-column boxes."""
    a = tlx.local_alloc((BM, BK), tl.bfloat16, 2)
    b = tlx.local_alloc((BK, BN), tl.bfloat16, 2)
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, storage=tlx.storage_kind.tmem)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    done = tlx.alloc_barriers(1, arrive_count=1)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    k_tiles = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(done[0], 0)
            c = tlx.local_load(acc[0])
            rows = pid_m * BM + tl.arange(0, BM)
            cols = pid_n * BN + tl.arange(0, BN)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))
        with tlx.async_task(num_warps=1):
            for k in range(k_tiles):
                s, p = tlx.get_bufidx_phase(k, 2)
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], (BM * BK + BK * BN) * 2)
                tlx.async_descriptor_load(a_desc, a[s], [pid_m * BM, k * BK], full[s])
                for j in tl.static_range(BN // 64):
                    tlx.async_descriptor_load(b_desc, tlx.local_slice(b[s], [0, j * 64], [BK, 64]),
                                              [k * BK, pid_n * BN + j * 64], full[s])
        with tlx.async_task(num_warps=1):
            for k in range(k_tiles):
                s, p = tlx.get_bufidx_phase(k, 2)
                tlx.barrier_wait(full[s], p)
                tlx.async_dot(a[s], b[s], acc[0], use_acc=k > 0, mBarriers=[empty[s]])
            tlx.tcgen05_commit(done[0])


@tlxc.kernel
def persistent_gemm(a_desc: tlx.tensor_descriptor_type(tl.float16, [128, 64], swizzle=128),
                    b_desc: tlx.tensor_descriptor_type(tl.float16, [128, 64], swizzle=128),
                    c_ptr: tl.pointer_type(tl.float32), M: tl.int32, N: tl.int32, K: tl.int32,
                    BN: tl.constexpr = 128, SUBTILES: tl.constexpr = 2):
    """A persistent GEMM with two TMEM accumulators (the MMA of one tile overlaps the
    epilogue of the last), B stored [BN, BK] and read K-major through local_trans, and
    an epilogue that reads the accumulator in column subtiles (subslice)."""
    a = tlx.local_alloc((BM, BK), tl.float16, 2)
    b = tlx.local_alloc((BN, BK), tl.float16, 2)
    acc = tlx.local_alloc((BM, BN), tl.float32, 2, storage=tlx.storage_kind.tmem)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    acc_full = tlx.alloc_barriers(2, arrive_count=1)
    acc_empty = tlx.alloc_barriers(2, arrive_count=1)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    SUB: tl.constexpr = BN // SUBTILES
    with tlx.async_tasks():
        with tlx.async_task("default"):
            t = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                buf, phase = tlx.get_bufidx_phase(t, 2)
                tlx.barrier_wait(acc_full[buf], phase)
                rows = (tile // num_pid_n) * BM + tl.arange(0, BM)
                for j in tl.static_range(SUBTILES):
                    part = tlx.local_load(tlx.subslice(acc[buf], j * SUB, SUB))
                    cols = (tile % num_pid_n) * BN + j * SUB + tl.arange(0, SUB)
                    tl.store(c_ptr + rows[:, None] * N + cols[None, :], part,
                             mask=(rows[:, None] < M) & (cols[None, :] < N))
                tlx.barrier_arrive(acc_empty[buf])
                t += 1  # noqa: SIM113
        with tlx.async_task(num_warps=1):
            count = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                for k in range(k_tiles):
                    s, p = tlx.get_bufidx_phase(count, 2)
                    tlx.barrier_wait(empty[s], p ^ 1)
                    tlx.barrier_expect_bytes(full[s], (BM * BK + BN * BK) * 2)
                    tlx.async_descriptor_load(a_desc, a[s], [(tile // num_pid_n) * BM, k * BK], full[s])
                    tlx.async_descriptor_load(b_desc, b[s], [(tile % num_pid_n) * BN, k * BK], full[s])
                    count += 1
        with tlx.async_task(num_warps=1):
            count = 0
            t = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                buf, phase = tlx.get_bufidx_phase(t, 2)
                tlx.barrier_wait(acc_empty[buf], phase ^ 1)
                for k in range(k_tiles):
                    s, p = tlx.get_bufidx_phase(count, 2)
                    tlx.barrier_wait(full[s], p)
                    tlx.async_dot(a[s], tlx.local_trans(b[s]), acc[buf], use_acc=k > 0, mBarriers=[empty[s]])
                    count += 1
                tlx.tcgen05_commit(acc_full[buf])
                t += 1  # noqa: SIM113


@tlxc.kernel
def fp8_gemm(a_desc: tlx.tensor_descriptor_type(tl.float8e4nv, [128, 128], swizzle=128),
             b_desc: tlx.tensor_descriptor_type(tl.float8e4nv, [128, 128], swizzle=128),
             c_ptr: tl.pointer_type(tl.float32), N: tl.int32, K: tl.int32):
    """One 128x128 tile of an e4m3 GEMM (kind::f8f6f4, k32): B stored [N, K], K-major."""
    a = tlx.local_alloc((128, 128), tl.float8e4nv, 1)
    b = tlx.local_alloc((128, 128), tl.float8e4nv, 1)
    acc = tlx.local_alloc((128, 128), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    phase = 0
    for k in range(0, K, 128):
        tlx.barrier_expect_bytes(bars[0], 2 * 128 * 128)
        tlx.async_descriptor_load(a_desc, a[0], [tl.program_id(0) * 128, k], bars[0])
        tlx.async_descriptor_load(b_desc, b[0], [tl.program_id(1) * 128, k], bars[0])
        tlx.barrier_wait(bars[0], phase)
        tlx.async_dot(a[0], tlx.local_trans(b[0]), acc[0], use_acc=k > 0, mBarriers=[bars[1]])
        tlx.barrier_wait(bars[1], phase)
        phase ^= 1
    c = tlx.local_load(acc[0])
    rows = tl.program_id(0) * 128 + tl.arange(0, 128)
    cols = tl.program_id(1) * 128 + tl.arange(0, 128)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], c)


@tlxc.kernel
def tf32_sync(a_desc: tlx.tensor_descriptor_type(tl.float32, [128, 32], swizzle=128),
              b_desc: tlx.tensor_descriptor_type(tl.float32, [64, 32], swizzle=128),
              bias_ptr: tl.pointer_type(tl.float32), c_ptr: tl.pointer_type(tl.float32), N: tl.int32):
    """f32 inputs as tf32 (kind::tf32, k8), the synchronous form (no mBarriers), and a
    local_store to tensor memory: acc = bias, then acc += A @ B."""
    a = tlx.local_alloc((128, 32), tl.float32, 1)
    b = tlx.local_alloc((64, 32), tl.float32, 1)
    acc = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    rows = tl.arange(0, 128)
    cols = tl.arange(0, 64)
    tlx.local_store(acc[0], tl.load(bias_ptr + rows[:, None] * 64 + cols[None, :]))
    tlx.barrier_expect_bytes(bar[0], (128 + 64) * 32 * 4)
    tlx.async_descriptor_load(a_desc, a[0], [tl.program_id(0) * 128, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_dot(a[0], tlx.local_trans(b[0]), acc[0], use_acc=True)
    c = tlx.local_load(acc[0])
    out_rows = tl.program_id(0) * 128 + rows
    tl.store(c_ptr + out_rows[:, None] * N + cols[None, :], c)


@tlxc.kernel
def m_major_a(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
              b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
              c_ptr: tl.pointer_type(tl.float32), N: tl.int32):
    """A stored [K, M] (M-major, read through local_trans; 256-byte rows stored as two
    128B-swizzled column blocks), B [N, K] K-major, a predicated synchronous MMA."""
    a = tlx.local_alloc((64, 128), tl.bfloat16, 1)
    b = tlx.local_alloc((64, 64), tl.bfloat16, 1)
    acc = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], (64 * 128 + 64 * 64) * 2)
    for j in tl.static_range(2):
        tlx.async_descriptor_load(a_desc, tlx.local_slice(a[0], [0, j * 64], [64, 64]), [0, j * 64], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [tl.program_id(0) * 64, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_dot(tlx.local_trans(a[0]), tlx.local_trans(b[0]), acc[0], use_acc=False, pred=N > 0)
    c = tlx.local_load(acc[0])
    rows = tl.arange(0, 128)
    cols = tl.program_id(0) * 64 + tl.arange(0, 64)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], c)


@tlxc.kernel
def tf32_n_major_b(a_desc: tlx.tensor_descriptor_type(tl.float32, [128, 32], swizzle=128),
                   b_desc: tlx.tensor_descriptor_type(tl.float32, [32, 32], swizzle=128),
                   c_ptr: tl.pointer_type(tl.float32)):
    """tf32 with B [K, N] row-major (N-major): refused (tcgen05 transposes tf32 only from
    buffers with 32-byte swizzle atoms)."""
    a = tlx.local_alloc((128, 32), tl.float32, 1)
    b = tlx.local_alloc((32, 32), tl.float32, 1)
    acc = tlx.local_alloc((128, 32), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], (128 + 32) * 32 * 4)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_dot(a[0], b[0], acc[0], use_acc=False)
    c = tlx.local_load(acc[0])
    tl.store(c_ptr + tl.arange(0, 128)[:, None] * 32 + tl.arange(0, 32)[None, :], c)


@tlxc.kernel
def stored_operands(a_ptr: tl.pointer_type(tl.bfloat16), b_ptr: tl.pointer_type(tl.bfloat16),
                    c_ptr: tl.pointer_type(tl.float32)):
    """Operands written to shared memory from registers (no TMA): the shared-layouts pass
    swizzles them for the MMA, and the threads sync before thread 0 issues."""
    a = tlx.local_alloc((128, 64), tl.bfloat16, 1)
    b = tlx.local_alloc((64, 64), tl.bfloat16, 1)
    acc = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
    rows = tl.arange(0, 128)
    cols = tl.arange(0, 64)
    tlx.local_store(a[0], tl.load(a_ptr + rows[:, None] * 64 + cols[None, :]))
    tlx.local_store(b[0], tl.load(b_ptr + cols[:, None] * 64 + cols[None, :]))
    tlx.fence("async_shared")
    tlx.async_dot(a[0], b[0], acc[0], use_acc=False)
    tl.store(c_ptr + rows[:, None] * 64 + cols[None, :], tlx.local_load(acc[0]))


def _spec(kernel, **constexprs):
    return specialization_from_types(kernel, {}, constexprs)


def _compile(kernel, arch="sm_100a", stages=("ir", "ir.opt", "cuda", "cubin"), **constexprs):
    return compile_kernel(kernel, _spec(kernel, **constexprs), arch=arch, num_warps=4, stages=stages)


KERNELS = {"ws_gemm": ws_gemm, "persistent_gemm": persistent_gemm, "fp8_gemm": fp8_gemm, "tf32_sync": tf32_sync,
           "m_major_a": m_major_a, "stored_operands": stored_operands}


# -- encodings ------------------------------------------------------------------------------------
def test_descriptor_fields_follow_the_ptx_table():
    # LBO 16 B -> 1 in bits 16-29; SBO 1024 B -> 64 in bits 32-45; 0b001 in bits 46-48;
    # 128B swizzle -> 2 in bits 61-63 (64B -> 4, 32B -> 6)
    assert descriptor_fields(16, 1024, 128) == (1 << 16) | (64 << 32) | (1 << 46) | (2 << 61)
    assert descriptor_fields(8192, 1024, 128) == 0x4000_4040_0200_0000
    assert descriptor_fields(16, 512, 64) >> 61 == 4
    assert descriptor_fields(16, 256, 32) >> 61 == 6


def test_instruction_descriptor_follows_the_ptx_table():
    # bf16 x bf16 -> f32, K-major A, N-major B, 128 x 128: D type 1 << 4, A 1 << 7, B 1 << 10,
    # transpose B 1 << 16, N >> 3 = 16 << 17, M >> 4 = 8 << 24
    assert instruction_descriptor(T.bf16, 128, 128, 0, 1) == \
        (1 << 4) | (1 << 7) | (1 << 10) | (1 << 16) | (16 << 17) | (8 << 24)
    assert instruction_descriptor(T.f16, 128, 256, 0, 0) == (1 << 4) | (32 << 17) | (8 << 24)
    assert instruction_descriptor(T.f32, 128, 64, 0, 0) == (1 << 4) | (2 << 7) | (2 << 10) | (8 << 17) | (8 << 24)
    e5m2 = instruction_descriptor(T.f8e5m2, 128, 16, 1, 0)
    assert e5m2 == (1 << 4) | (1 << 7) | (1 << 10) | (1 << 15) | (2 << 17) | (8 << 24)


def test_load_chunks_are_powers_of_two_up_to_128_columns():
    assert _chunks(128) == [(0, 128)]
    assert _chunks(256) == [(0, 128), (128, 128)]
    assert _chunks(48) == [(0, 32), (32, 16)]
    assert _chunks(1) == [(0, 1)]
    assert _chunks(128, 64) == [(0, 64), (64, 64)]      # kernels of more than 384 threads


# -- NVRTC compiles (ptxas checks every tcgen05 instruction) ----------------------------------------
@needs_nvrtc
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiles_to_cubin_for_sm100a(name):
    compiled = _compile(KERNELS[name])
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    for text in ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
                 "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",
                 "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
                 "tcgen05.ld.sync.aligned.32x32b", "tcgen05.wait::ld.sync.aligned",
                 "tcgen05.fence::after_thread_sync", "tcgen05.fence::before_thread_sync"):
        assert text in cuda, f"{name}: expected {text!r} in the CUDA"
    assert compiled.metadata["spills_bytes"] == 0, compiled.metadata.get("ptxas_log")


@needs_nvrtc
def test_ws_gemm_mma_and_commits():
    cuda = _compile(ws_gemm).asm["cuda"]
    assert "tcgen05.mma.cta_group::1.kind::f16" in cuda
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in cuda
    # bf16, K-major A, N-major B (bit 16), N = 128, M = 128
    idesc = instruction_descriptor(T.bf16, 128, 128, 0, 1)
    assert f"{idesc:#010x}u" in cuda
    # one elected thread issues the k-steps (BK / 16 = 4) and commits to the stage's empty barrier
    mma = re.search(r"if \(task_tid == 0\) \{\n(.*?)\n    \}\n", cuda, re.DOTALL).group(1)
    assert "kk < 4" in mma and "tlx_tcgen05_commit(" in mma
    assert "if (task_tid == 0) tlx_tcgen05_commit(" in cuda           # tcgen05_commit(done[0])
    # the MMA task's waits are followed by the after_thread_sync fence; the producer's are not
    producer = cuda[cuda.index("warps 4..4"):cuda.index("warps 5..5")]
    assert "tlx_tcgen05" not in producer
    mma_task = cuda[cuda.index("warps 5..5"):]
    assert re.search(r"tlx_mbarrier_wait\([^;]*\);\n\s*tlx_tcgen05_fence_after_thread_sync\(\);", mma_task)
    # the epilogue reads its rows: warp w's lanes start at row 32 w
    assert "((unsigned)(32 * task_warp) << 16)" in cuda
    assert "tlx_tcgen05_ld_32x32b_x128(" in cuda and "tlx_tcgen05_wait_ld<128>" in cuda


@needs_nvrtc
def test_allocation_at_start_and_deallocation_at_end():
    cuda = _compile(ws_gemm).asm["cuda"]
    alloc = cuda.index("tlx_tcgen05_alloc(tlx_tmem_slot, 128u)")
    tasks = cuda.index("__syncthreads();  // barriers initialized")
    dealloc = cuda.index("tlx_tcgen05_dealloc(tlx_tmem_base, 128u)")
    assert alloc < tasks < dealloc
    assert cuda.rindex("__syncthreads();") < dealloc
    assert cuda.index("const unsigned acc = tlx_tmem_base + 0u;") > alloc


@needs_nvrtc
def test_two_accumulators_subslices_and_k_major_b():
    compiled = _compile(persistent_gemm)
    cuda = compiled.asm["cuda"]
    assert "tmem_columns = 256" in compiled.asm["ir.opt"]
    assert "tlx_tcgen05_alloc(tlx_tmem_slot, 256u)" in cuda
    assert "* 128u;" in cuda                         # acc[buf]: 128 columns per buffer
    assert re.search(r"\+ \(unsigned\)\(\w+\);", cuda)     # subslice at a column offset
    assert "tlx_tcgen05_ld_32x32b_x64(" in cuda      # 64-column subtiles
    assert f"{instruction_descriptor(T.f16, 128, 128, 0, 0):#010x}u" in cuda      # both K-major
    # the epilogue fences before it releases the accumulator
    epilogue = cuda[cuda.index("warps 0..3"):cuda.index("warps 4..4")]
    assert re.search(r"tlx_tcgen05_fence_before_thread_sync\(\);\n\s*tlx_bar_sync\(1, 128\);\n\s*if \(task_tid == 0\) "
                     r"tlx_mbarrier_arrive", epilogue)


@needs_nvrtc
def test_fp8_uses_kind_f8f6f4_with_k32():
    cuda = _compile(fp8_gemm).asm["cuda"]
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in cuda
    assert f"{instruction_descriptor(T.f8e4m3, 128, 128, 0, 0):#010x}u" in cuda
    assert "kk < 4" in cuda                           # K = 128 bytes = 4 steps of k32
    # one task does everything: its threads sync before thread 0 issues (they read the accumulator)
    assert re.search(r"tlx_tcgen05_fence_before_thread_sync\(\);\n\s*__syncthreads\(\);\n\s*"
                     r"tlx_tcgen05_fence_after_thread_sync\(\);\n\s*// tcgen05.mma", cuda)


@needs_nvrtc
def test_tf32_sync_form_and_local_store():
    cuda = _compile(tf32_sync).asm["cuda"]
    assert "tcgen05.mma.cta_group::1.kind::tf32" in cuda
    assert f"{instruction_descriptor(T.f32, 128, 64, 0, 0):#010x}u" in cuda
    assert "tlx_tcgen05_st_32x32b_x64(" in cuda and "tlx_tcgen05_wait_st();" in cuda
    # the synchronous MMA: thread 0 commits to the kernel's own barrier, waits, then everyone syncs
    assert "tlx_tcgen05_commit(tlx_mma_sync_bar + 0);" in cuda
    assert "tlx_mbarrier_wait(tlx_mma_sync_bar + 0, (unsigned)(tlx_mma_sync_phase0)); tlx_mma_sync_phase0 ^= 1;" \
        in cuda
    assert re.search(r"__syncthreads\(\);  // the synchronous MMA is done.*\n\s*tlx_tcgen05_fence_after_thread_sync",
                     cuda)


@needs_nvrtc
def test_m_major_a_and_a_predicated_sync_mma():
    cuda = _compile(m_major_a).asm["cuda"]
    # A M-major (bit 15), B K-major; A's two 64-column blocks 8192 bytes apart are its LBO
    assert f"{instruction_descriptor(T.bf16, 128, 64, 1, 0):#010x}u" in cuda
    assert f"{descriptor_fields(8192, 1024, 128):#x}ull" in cuda
    assert re.search(r"if \(tid == 0 && \w+\) \{", cuda)            # pred: nothing issued when false
    assert "tlx_tcgen05_commit(tlx_mma_sync_bar + 0);" in cuda


@needs_nvrtc
def test_operands_stored_from_registers_are_swizzled_and_synced():
    compiled = _compile(stored_operands)
    assert compiled.asm["ir.opt"].count("swizzle = 128") == 2        # demanded by the tcgen05 MMA alone
    cuda = compiled.asm["cuda"]
    assert re.search(r"tlx_fence_proxy_async_shared_cta\(\);\n(.*\n)*?\s*__syncthreads\(\);\n\s*"
                     r"tlx_tcgen05_fence_after_thread_sync\(\);\n\s*// tcgen05.mma", cuda)


@needs_nvrtc
def test_blackwell_example_compiles():
    """examples/blackwell_gemm_ws.py (BN = 256: a B of four 64-column blocks, four
    epilogue subtiles) as its launch specializes it."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import blackwell_gemm_ws as G
    compiled = _compile(G.matmul_tcgen05_kernel)
    cuda = compiled.asm["cuda"]
    assert "tlx_tcgen05_alloc(tlx_tmem_slot, 512u)" in cuda          # 2 accumulators of 256 columns
    assert f"{instruction_descriptor(T.bf16, 128, 256, 0, 1):#010x}u" in cuda
    assert "tlx_tcgen05_ld_32x32b_x64(" in cuda
    assert compiled.metadata["spills_bytes"] == 0


@needs_nvrtc
def test_output_is_deterministic():
    assert _compile(persistent_gemm).asm["cuda"] == _compile(persistent_gemm).asm["cuda"]


# -- errors ---------------------------------------------------------------------------------------
def test_sm90a_refuses_tensor_memory():
    with pytest.raises(CompilationError, match=r"sm_100a.*sm_90a|Blackwell"):
        _compile(ws_gemm, arch="sm_90a")


def test_codegen_for_sm90a_names_the_op_and_arch():
    """IR built for sm_100a rendered for sm_90a: the lowering itself refuses, naming both."""
    from tlxc.codegen_nvptx.cuda import render_kernel
    module = optimize(frontend(ws_gemm, _spec(ws_gemm), arch="sm_100a"), "sm_100a", 4)
    with pytest.raises(CompilationError, match=r"tlx\.local_alloc needs .*sm_100a.*sm_90a"):
        render_kernel(module.kernels[0], "sm_90a")


def test_tf32_n_major_operand_is_refused():
    with pytest.raises(CompilationError, match=r"tf32 operands N-major only.*local_trans"):
        _compile(tf32_n_major_b, stages=("ir", "ir.opt", "cuda"))
