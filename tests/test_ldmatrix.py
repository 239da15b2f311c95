"""tl.dot on sm_80 / sm_89 (issue 19): lower-dot-to-wgmma gives the dot shared operand buffers,
pipeline-loads rings them with cp.async, async-dot-on-mfma turns the async_dot back into
local_loads and an mma.sync tl.dot, and the local_loads read the fragments with ldmatrix
(``codegen_nvptx/rules_ldmatrix.py``): .trans for an operand whose fragment pairs run across
the buffer's rows.  A Python model of ldmatrix checks every lane's registers of the plan."""
from __future__ import annotations

import os
import re

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_wgmma as K

from tlxc.codegen_nvptx.rules_ldmatrix import ldmatrix_plan
from tlxc.ir import layouts_nvidia as N


def _signature(dtype: str, a_major: str, b_major: str) -> str:
    a = "stride_am=i32:16,stride_ak=i32:1" if a_major == "K" else "stride_am=i32:1,stride_ak=i32:16"
    b = "stride_bk=i32:16,stride_bn=i32:1" if b_major == "N" else "stride_bk=i32:1,stride_bn=i32:16"
    return (f"a_ptr=*{dtype}:16,b_ptr=*{dtype}:16,c_ptr=*{dtype}:16,M=i32:16,N=i32:16,K=i32:16,{a},{b},"
            f"stride_cm=i32:16")


def _ldmatrix_model(plan, layout, contiguous):
    """What ldmatrix.x4 (.trans) leaves in each (warp, lane, register): the buffer coordinates
    (row-major in the buffer's (r, c) terms, mapped back to the tensor's dims)."""
    table = plan.address.coords_table()           # [warps, lanes, instructions, 2]: row starts
    warps, lanes, count = table.shape[:3]
    out = {}
    for w in range(warps):
        for q in range(count):
            for t in range(lanes):
                for j in range(4):                # word j: matrix j, rows given by lanes 8j .. 8j+7
                    for h in range(2):
                        if plan.trans:            # column t/4, rows 2(t%4)+h of the matrix
                            row, col = 2 * (t % 4) + h, t // 4
                        else:                     # row t/4, columns 2(t%4)+h
                            row, col = t // 4, 2 * (t % 4) + h
                        start = [int(x) for x in table[w, 8 * j + row, q]]
                        start[contiguous] += col
                        out[(w, t, q * 8 + 2 * j + h)] = tuple(start)
    return out


@pytest.mark.parametrize("shape, num_warps", [((128, 128), 4), ((128, 256), 8), ((64, 64), 4), ((64, 128), 8)])
@pytest.mark.parametrize("operand, contiguous, trans", [(0, 1, False), (0, 0, True), (1, 1, True), (1, 0, False)])
def test_plan_loads_every_fragment_register(shape, num_warps, operand, contiguous, trans):
    m, n = shape
    k = 64
    acc = N.mma_accumulator_layout((m, n), num_warps, "mma_v2")
    layout = N.mma_operand_layout((m, k) if operand == 0 else (k, n), operand, acc, 16)
    plan = ldmatrix_plan(layout, contiguous)
    assert plan is not None and plan.trans == trans
    model = _ldmatrix_model(plan, layout, contiguous)
    table = layout.coords_table()                 # [warps, lanes, registers, 2]
    expected = {(w, t, r): tuple(int(x) for x in table[w, t, r]) for w in range(table.shape[0])
                for t in range(table.shape[1]) for r in range(table.shape[2])}
    assert model == expected


def test_plan_refuses_other_layouts():
    from tlxc.ir import layouts as L
    blocked = L.default_blocked((128, 64), 4, 16)
    assert ldmatrix_plan(blocked, 1) is None


def _compile(arch: str, a_major: str = "K", b_major: str = "N", dtype: str = "bf16", stages=("ptx",),
             num_warps: int = 8, **meta):
    meta = {"BM": 128, "BN": 128, "BK": 64, **meta}
    return K.tile_matmul.compile(_signature(dtype, a_major, b_major), meta, arch=arch, num_warps=num_warps,
                                 stages=stages)


@pytest.mark.parametrize("a_major, b_major, plain, trans", [("K", "N", True, True), ("K", "K", True, False),
                                                             ("M", "N", False, True), ("M", "K", True, True)])
def test_sm80_dot_reads_operands_with_ldmatrix(a_major, b_major, plain, trans):
    ptx = _compile("sm_80", a_major, b_major).asm["ptx"]
    assert "mma.sync.aligned.m16n8k16" in ptx
    assert ("ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx) == plain
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx) == trans
    assert "cp.async.cg.shared.global" in ptx                      # the operand ring
    assert not re.search(r"ld\.shared\.(u16|b16)", ptx)           # no element-wise operand reads


def test_sm80_dot_is_pipelined_with_cp_async_ring():
    compiled = _compile("sm_80", stages=("ir.opt",), STAGES=3)
    text = compiled.asm["ir.opt"]
    assert "num=3" in text and "tlx.async_wait_group {pendings = 1}" in text
    assert "tlx.async_dot" not in text                               # mma.sync: no wgmma ops left
    assert text.count("tlx.local_load") == 2 and "algorithm = \"mma_v2\"" in text


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_ptxas_accepts_the_ldmatrix_kernel(arch, dtype):
    compiled = _compile(arch, dtype=dtype, stages=("ptx", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "ldmatrix" in compiled.asm["ptx"]


def test_sm89_ring_fits_its_shared_memory():
    compiled = _compile("sm_89", stages=("ir.opt",), BN=256, STAGES=4)
    assert compiled.module.kernels[0].attrs["shared_bytes"] <= 101376


# -- GPU: the sm_80 cubin on whatever NVIDIA GPU is here (compute capability >= 8.0 runs it) ----
@pytest.mark.gpu
@pytest.mark.parametrize("a_major, b_major", [("K", "N"), ("K", "K"), ("M", "N"), ("M", "K")])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_sm80_cubin_matches_float64_on_gpu(a_major, b_major, dtype, num_warps):
    from tlxc.runtime import driver
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    m, n, k = 304, 208, 1008          # the signature states divisibility by 16; not tile multiples
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    a = torch.randn(m, k, generator=gen).to(tdtype).cuda()
    b = torch.randn(k, n, generator=gen).to(tdtype).cuda()
    if a_major == "M":
        a = a.t().contiguous().t()
    if b_major == "K":
        b = b.t().contiguous().t()
    compiled = _compile("sm_80", a_major, b_major, dtype, stages=("cuda", "cubin"), num_warps=num_warps, STAGES=3)
    assert "ldmatrix" in compiled.asm["cuda"]
    meta = compiled.metadata
    signature = re.search(r'__global__ void (?:__launch_bounds__\(\d+\) )?\w+\(([^)]*)\)', compiled.asm["cuda"]).group(1)
    names = [p.split()[-1].lstrip("*") for p in signature.split(",")]       # the parameters not specialized away
    c = torch.full((m, n), float("nan"), dtype=tdtype, device="cuda")
    values = {"a_ptr": a.data_ptr(), "b_ptr": b.data_ptr(), "c_ptr": c.data_ptr(), "M": m, "N": n, "K": k,
              "stride_am": a.stride(0), "stride_ak": a.stride(1), "stride_bk": b.stride(0), "stride_bn": b.stride(1),
              "stride_cm": c.stride(0)}
    # SASS runs only on its own major version: an sm_80 cubin does not load on the H200 (9.0), so the
    # sm_80 lowering's CUDA (ldmatrix, mma.sync, cp.async: all valid on sm_90) is built for the device.
    from tlxc.codegen_nvptx.toolchain import compile_cuda
    cubin = compile_cuda(compiled.asm["cuda"], "sm_90a", [meta["name"]]).cubin
    module = driver.CudaModule.load(cubin)
    launch = module.function(meta["name"]).make_launcher(meta["params"])
    grid = ((m + 127) // 128, (n + 127) // 128, 1)
    launch(grid, (meta["threads"], 1, 1), meta["shared_bytes"], driver.current_stream_handle(c.device.index),
           [values[name] for name in names])
    torch.cuda.synchronize()
    expected = a.double() @ b.double()
    bound = 2 * {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[tdtype] * expected.abs() + \
        k * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    assert not c.isnan().any()
    assert ((c.double() - expected).abs() <= bound).all()


# -- one barrier per ring iteration (codegen_c/shared_order.py: ring indices) ----------------------
import tlxc  # noqa: E402
import tlxc.language as tl  # noqa: E402
from tlxc.language import tlx  # noqa: E402


@tlxc.kernel
def ring_walk(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32), iters: tl.int32,
              B: tl.constexpr, SAME: tl.constexpr):
    """Each iteration reads buffer s transposed (other threads' elements) and then writes the
    buffer before s (``SAME``: s itself), as a ring's refill does."""
    buf = tlx.local_alloc((B, B), tl.float32, 3)
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    acc = tl.zeros((B, B), dtype=tl.float32)
    s = 0
    for i in range(iters):
        acc += tlx.local_load(tlx.local_trans(buf[s]))
        prev = tl.where(s == 0, 2, s - 1)
        tlx.local_store(buf[s if SAME else prev], tl.load(x_ptr + offs) + i)
        s = tl.where(s == 2, 0, s + 1)
    tl.store(y_ptr + offs, acc)


def _loop_barriers(same: bool) -> int:
    cuda = ring_walk.compile(constexprs={"B": 32, "SAME": same}, num_warps=4, stages=("cuda",)).asm["cuda"]
    start = cuda.index("for (int ")
    while "iters" not in cuda[start:cuda.index("\n", start)]:
        start = cuda.index("for (int ", start + 1)
    depth, i = 0, cuda.index("{", start)
    for i in range(cuda.index("{", start), len(cuda)):
        depth += {"{": 1, "}": -1}.get(cuda[i], 0)
        if depth == 0:
            break
    return cuda[start:i].count("__syncthreads()")


def test_a_refill_of_the_previous_stage_needs_no_barrier_after_the_read():
    # the back edge still gets its barrier (the next read may be of the stage just written:
    # a ring index names a value of its own iteration only)
    assert _loop_barriers(same=False) == 1
    assert _loop_barriers(same=True) == 2


def test_sm80_ring_loop_has_one_barrier():
    cuda = _compile("sm_80", stages=("cuda",), STAGES=3).asm["cuda"]
    body = cuda[cuda.index("for (int k_"):cuda.index("tlx_cp_async_wait_group<0>")]
    assert body.count("__syncthreads()") == 1
