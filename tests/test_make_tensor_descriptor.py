"""In-kernel tensor descriptors (``tl.make_tensor_descriptor``) used the way Triton's grouped-GEMM
and persistent-matmul tutorials use them: descriptors built once before a persistent tile loop,
or per problem inside a runtime ``if`` of a group loop, ``desc.load`` / ``desc.store`` of boxes that
overhang odd-shaped tensors, descriptors passed to helpers, carried by loops and merged by
``if``, ``desc.block_shape`` / ``desc.dtype``; the other spellings (``tl.load_tensor_descriptor``,
``tl._experimental_descriptor_load/store``); located errors; sm_90a cubins; ``gpu`` versions.

Interpreter runs compare with torch (float64 references, fresh random inputs, NaN-poisoned outputs,
shapes that are not multiples of the box).
"""
from __future__ import annotations

import importlib.util
import linecache
import os
import tempfile
import textwrap

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.interpreter import interpret


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# -- kernels --------------------------------------------------------------------------------------------
@tlxc.jit
def _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@tlxc.jit
def td_persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         SUBTILE: tl.constexpr):
    """C = A @ B.T (A: M x K, B: N x K, row-major): descriptors built once, a persistent loop over
    tiles, the epilogue optionally stored as two half-width boxes."""
    dtype = c_ptr.dtype.element_ty
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N if not SUBTILE else BLOCK_N // 2])
    num_pid_in_group = GROUP_M * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGRAMS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        if SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc0.to(dtype))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], acc1.to(dtype))
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(dtype))


@tlxc.jit
def td_grouped_matmul(a_ptr, b_ptr, c_ptr, sizes, starts, lds, group_size, NUM_PROGRAMS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Problem g: C_g = A_g @ B_g.T, each matrix at an element offset (starts) of one packed buffer
    with its own leading dimension (lds); descriptors built per problem inside a runtime 'if'."""
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(sizes + g * 3)
        gn = tl.load(sizes + g * 3 + 1)
        gk = tl.load(sizes + g * 3 + 2)
        num_n_tiles = tl.cdiv(gn, BLOCK_N)
        num_tiles = tl.cdiv(gm, BLOCK_M) * num_n_tiles
        if tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            a_desc = tl.make_tensor_descriptor(a_ptr + tl.load(starts + g * 3), shape=[gm, gk],
                                               strides=[tl.load(lds + g * 3), 1], block_shape=[BLOCK_M, BLOCK_K])
            b_desc = tl.make_tensor_descriptor(b_ptr + tl.load(starts + g * 3 + 1), shape=[gn, gk],
                                               strides=[tl.load(lds + g * 3 + 1), 1], block_shape=[BLOCK_N, BLOCK_K])
            c_desc = tl.make_tensor_descriptor(c_ptr + tl.load(starts + g * 3 + 2), shape=[gm, gn],
                                               strides=[tl.load(lds + g * 3 + 2), 1], block_shape=[BLOCK_M, BLOCK_N])
            while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
                tile = tile_idx - last_problem_end
                offs_m = (tile // num_n_tiles) * BLOCK_M
                offs_n = (tile % num_n_tiles) * BLOCK_N
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for kk in range(0, tl.cdiv(gk, BLOCK_K)):
                    a = a_desc.load([offs_m, kk * BLOCK_K])
                    b = b_desc.load([offs_n, kk * BLOCK_K])
                    acc += tl.dot(a, b.T)
                c_desc.store([offs_m, offs_n], acc.to(tl.float16))
                tile_idx += NUM_PROGRAMS
        last_problem_end = last_problem_end + num_tiles


@tlxc.jit
def td_tile_copy(x_ptr, out_ptr, rows, cols, ld, row0, col0, BR: tl.constexpr, BC: tl.constexpr,
                 PADDING: tl.constexpr):
    """The (BR, BC) box at (row0, col0) of a (rows, cols) view with leading dimension ld, copied
    into a dense (BR, BC) block through a second descriptor; checks the attributes."""
    src = tl.make_tensor_descriptor(x_ptr, [rows, cols], [ld, 1], [BR, BC], padding_option=PADDING)
    dst = tl.make_tensor_descriptor(out_ptr, [BR, BC], [BC, 1], [BR, BC])
    tl.static_assert(src.block_shape == (BR, BC))
    tl.static_assert(src.dtype == out_ptr.dtype.element_ty)
    tile = src.load([row0, col0])
    dst.store([0, 0], tile + tl.zeros(src.block_shape, src.dtype))


@tlxc.jit
def td_fill(buf_ptr, rows, cols, ld, value, BR: tl.constexpr, BC: tl.constexpr):
    """Every (BR, BC) box of a (rows, cols) view written with value + its linear index: the boxes
    overhang the view, whose storage (ld columns, more rows) must stay untouched outside it."""
    desc = tl.make_tensor_descriptor(buf_ptr, [rows, cols], [ld, 1], [BR, BC])
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    desc.store([tl.program_id(0) * BR, tl.program_id(1) * BC], (r * cols + c).to(tl.float32) + value)


@tlxc.jit
def _scaled_box(desc, row, col, scale):
    return desc.load([row, col]) * scale


@tlxc.jit
def td_row_blocks(x_ptr, out_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """out[rows block, 0:BC] = the sum of x's column tiles, with the source descriptor rebuilt at
    the next column tile each iteration (a loop-carried descriptor), read through a helper."""
    row = tl.program_id(0) * BR
    desc = tl.make_tensor_descriptor(x_ptr, [rows, cols], [cols, 1], [BR, BC])
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    width = cols
    for k in range(tl.cdiv(cols, BC)):
        acc += _scaled_box(desc, row, 0, 1.0)
        width = width - BC
        desc = tl.make_tensor_descriptor(x_ptr + (k + 1) * BC, [rows, width], [cols, 1], [BR, BC])
    out = tl.make_tensor_descriptor(out_ptr, [rows, BC], [BC, 1], [BR, BC])
    tl.store_tensor_descriptor(out, [row, 0], acc)


@tlxc.jit
def td_choose(x_ptr, y_ptr, out_ptr, n, use_y, B: tl.constexpr):
    """A descriptor chosen by a runtime 'if' (merged field by field), read with the Triton 3.1
    spellings; a 1-D descriptor."""
    desc = tl.make_tensor_descriptor(x_ptr, [n], [1], [B])
    if use_y != 0:
        desc = tl.make_tensor_descriptor(y_ptr, [n], [1], [B])
    out = tl.make_tensor_descriptor(out_ptr, [n], [1], [B])
    off = tl.program_id(0) * B
    v = tl._experimental_descriptor_load(desc, [off], [B], tl.float32)
    tl._experimental_descriptor_store(out, v - 1.0, [off])


@tlxc.jit
def td_3d(x_ptr, out_ptr, d0, d1, d2, s0, s1, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    """A 3-D strided source (s0, s1, 1) copied into a dense (d0, d1, d2) output (shapes given as i64;
    desc.shape / desc.strides read back)."""
    src = tl.make_tensor_descriptor(x_ptr, [d0.to(tl.int64), d1, d2], [s0, s1, 1], [B0, B1, B2])
    dst = tl.make_tensor_descriptor(out_ptr, [d0, src.shape[1], d2], [d1 * d2, src.strides[2] * d2, 1], [B0, B1, B2])
    offs = [tl.program_id(0) * B0, tl.program_id(1) * B1, 0]
    tl.store_tensor_descriptor(dst, offs, tl.load_tensor_descriptor(src, offs))


@tlxc.jit
def td_host_spellings(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """The function spellings on a host descriptor (a tlxc.TensorDescriptor: its TMA path)."""
    offs = [tl.program_id(0) * BM, 0]
    x = tl.load_tensor_descriptor(in_desc, offs)
    tl._experimental_descriptor_store(out_desc, x * 2.0, offs)


# -- interpreter vs torch ---------------------------------------------------------------------------------
def _close(out: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    return (out.double() - ref).abs().max().item() <= tol * max(1.0, ref.abs().max().item())


# row strides stay 16-byte multiples (TMA: the encoder refuses others), sizes ragged against the boxes
@pytest.mark.parametrize("M,N,K,subtile,programs", [(37, 48, 56, False, 3), (70, 40, 24, True, 2)])
def test_persistent_matmul_matches_torch(M, N, K, subtile, programs):
    gen = _generator()
    a = torch.randn(M, K, generator=gen).to(torch.float16)
    b = torch.randn(N, K, generator=gen).to(torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    interpret(td_persistent_matmul, (programs,), (a, b, c, M, N, K),
              {"NUM_PROGRAMS": programs, "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2,
               "SUBTILE": subtile})
    assert not c.isnan().any()
    assert _close(c, a.double() @ b.double().T, 2e-3)


def test_grouped_matmul_matches_torch():
    gen = _generator()
    problems = [(19, 33, 40), (40, 17, 24), (8, 50, 16)]         # (m, n, k); leading dims padded
    a_parts, b_parts, c_views, starts, lds, sizes = [], [], [], [], [], []
    a_len = b_len = c_len = 0
    for m, n, k in problems:
        lda, ldb, ldc = k + 8, k + 16, (n + 15) // 8 * 8      # 16-byte multiples of f16
        a_parts.append(torch.randn(m * lda, generator=gen).to(torch.float16))
        b_parts.append(torch.randn(n * ldb, generator=gen).to(torch.float16))
        starts += [a_len, b_len, c_len]
        lds += [lda, ldb, ldc]
        sizes += [m, n, k]
        a_len, b_len = a_len + m * lda, b_len + n * ldb
        c_views.append((c_len, m, n, ldc))
        c_len += m * ldc
    a, b = torch.cat(a_parts), torch.cat(b_parts)
    c = torch.full((c_len,), float("nan"), dtype=torch.float16)
    programs = 4
    interpret(td_grouped_matmul, (programs,),
              (a, b, c, torch.tensor(sizes, dtype=torch.int32), torch.tensor(starts, dtype=torch.int32),
               torch.tensor(lds, dtype=torch.int32), len(problems)),
              {"NUM_PROGRAMS": programs, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16})
    for g, (m, n, k) in enumerate(problems):
        lda, ldb = lds[3 * g], lds[3 * g + 1]
        ag = a[starts[3 * g]:starts[3 * g] + m * lda].view(m, lda)[:, :k].double()
        bg = b[starts[3 * g + 1]:starts[3 * g + 1] + n * ldb].view(n, ldb)[:, :k].double()
        start, _, _, ldc = c_views[g]
        cg = c[start:start + m * ldc].view(m, ldc)
        assert _close(cg[:, :n], ag @ bg.T, 2e-3), g
        assert cg[:, n:].isnan().all(), f"problem {g}: a store wrote past the descriptor's last column"


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_load_pads_outside_the_tensor(padding):
    gen = _generator()
    rows, cols, ld = 13, 21, 24
    x = torch.randn(rows, ld, generator=gen)
    out = torch.full((16, 32), -7.0)
    interpret(td_tile_copy, (1,), (x, out, rows, cols, ld, 5, 4), {"BR": 16, "BC": 32, "PADDING": padding})
    expected = torch.full((16, 32), float("nan") if padding == "nan" else 0.0)
    expected[:rows - 5, :cols - 4] = x[5:, 4:cols]
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(1.5), expected.nan_to_num(1.5))


def test_negative_offsets_read_the_padding():
    gen = _generator()
    x = torch.randn(20, 20, generator=gen)
    out = torch.full((16, 16), -7.0)
    interpret(td_tile_copy, (1,), (x, out, 20, 20, 20, -3, -5), {"BR": 16, "BC": 16, "PADDING": "zero"})
    expected = torch.zeros(16, 16)
    expected[3:, 5:] = x[:13, :11]
    assert torch.equal(out, expected)


def test_store_writes_only_inside_the_tensor():
    rows, cols, ld = 19, 37, 48
    buf = torch.full((24, ld), float("nan"))
    interpret(td_fill, (_cdiv(rows, 8), _cdiv(cols, 16)), (buf, rows, cols, ld, 0.5), {"BR": 8, "BC": 16})
    expected = torch.full((24, ld), float("nan"))
    expected[:rows, :cols] = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) + 0.5
    assert torch.equal(buf.isnan(), expected.isnan())
    assert torch.equal(buf.nan_to_num(0.0), expected.nan_to_num(0.0))


def test_loop_carried_descriptor_through_a_helper():
    gen = _generator()
    rows, cols = 21, 72          # 288-byte rows (TMA: a 16-byte multiple), not a multiple of the box
    x = torch.randn(rows, cols, generator=gen)
    out = torch.full((rows, 16), float("nan"))
    interpret(td_row_blocks, (_cdiv(rows, 8),), (x, out, rows, cols), {"BR": 8, "BC": 16})
    padded = torch.zeros(rows, _cdiv(cols, 16) * 16, dtype=torch.float64)
    padded[:, :cols] = x.double()
    assert _close(out, padded.view(rows, -1, 16).sum(1), 1e-5)


@pytest.mark.parametrize("use_y", [0, 1])
def test_descriptor_merged_by_an_if_and_the_old_spellings(use_y):
    gen = _generator()
    n = 45
    x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    out = torch.full((n,), float("nan"))
    interpret(td_choose, (_cdiv(n, 16),), (x, y, out, n, use_y), {"B": 16})
    assert torch.equal(out, (y if use_y else x) - 1.0)


def test_three_dimensional_strided_source():
    gen = _generator()
    d0, d1, d2 = 5, 7, 12
    storage = torch.randn(d0, 9, 16, generator=gen)
    x = storage[:, :d1, :d2]
    out = torch.full((d0, d1, d2), float("nan"))
    interpret(td_3d, (_cdiv(d0, 2), _cdiv(d1, 4)), (storage, out, d0, d1, d2, 9 * 16, 16),
              {"B0": 2, "B1": 4, "B2": 16})
    assert torch.equal(out, x)


def test_function_spellings_keep_a_host_descriptor_on_its_tma_path():
    gen = _generator()
    x = torch.randn(40, 32, generator=gen)
    out = torch.full((40, 32), float("nan"))
    in_desc = tlxc.TensorDescriptor.from_tensor(x, [16, 32])
    out_desc = tlxc.TensorDescriptor.from_tensor(out, [16, 32])
    tlxc.interpret(td_host_spellings)[(3,)](in_desc, out_desc, BM=16, BN=32)
    assert torch.equal(out, x * 2.0)
    spec = specialization_from_args(td_host_spellings, {"in_desc": in_desc, "out_desc": out_desc, "BM": 16, "BN": 32})
    kernel = compile_kernel(td_host_spellings, spec, arch="sm_90a", num_warps=4)
    assert "tlx.async_descriptor_load" in kernel.asm["ir"] and "tlx.async_descriptor_store" in kernel.asm["ir"]
    assert kernel.asm["cubin"]


def test_set_allocator_is_accepted_and_never_called():
    calls = []
    tlxc.set_allocator(lambda size, alignment, stream: calls.append(size))
    try:
        x = torch.randn(20)
        out = torch.full((20,), float("nan"))
        interpret(td_choose, (2,), (x, x, out, 20, 0), {"B": 16})
        assert torch.equal(out, x - 1.0) and calls == []
    finally:
        tlxc.set_allocator(None)


# -- what the frontend builds, sm_90a compiles -------------------------------------------------------------
_PERSISTENT_SIG = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32:16,N=i32:16,K=i32:16"   # as an 8192^3 launch
_PERSISTENT_META = {"NUM_PROGRAMS": 132, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


def test_in_kernel_descriptors_store_by_tma_on_sm90a_and_load_by_masked_loads(monkeypatch):
    """sm_90a encodes each descriptor's tensor map in the kernel and stores its boxes by TMA
    (interpreter/tensormap.py, codegen_nvptx/rules_tensormap.py); desc.load stays a masked load, which
    the pipeline pass rings (tensor_desc.DESC_LOAD_BY_TMA); sm_80 has no TMA: masked stores too."""
    monkeypatch.delenv("TLXC_DEVICE_TENSORMAPS", raising=False)     # (the default: device maps)
    ir = td_persistent_matmul.compile(signature=_PERSISTENT_SIG, constexprs={**_PERSISTENT_META, "SUBTILE": False},
                                      arch="sm_90a", stages=("ir",)).asm["ir"]
    assert ir.count("tlx.make_tensor_descriptor") == 3 and "tlx.async_descriptor_load" not in ir
    assert "tlx.async_descriptor_store" in ir
    ir = td_persistent_matmul.compile(signature=_PERSISTENT_SIG, constexprs={**_PERSISTENT_META, "SUBTILE": False},
                                      arch="sm_80", stages=("ir",)).asm["ir"]
    assert "tlx.async_descriptor_load" not in ir and "tlx.make_tensor_descriptor" not in ir
    loads = [line for line in ir.splitlines() if " tl.load " in line and "tensor<" in line]
    assert loads and all("has_mask = true" in line for line in loads), loads


@pytest.mark.parametrize("subtile", [False, True])
def test_persistent_matmul_compiles_for_sm90a(subtile):
    kernel = td_persistent_matmul.compile(signature=_PERSISTENT_SIG, constexprs={**_PERSISTENT_META, "SUBTILE": subtile},
                                          arch="sm_90a")
    assert kernel.asm["cubin"]


def test_other_kernels_compile_for_sm90a():
    for kernel, signature, constexprs in [
        (td_grouped_matmul, "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,sizes=*i32,starts=*i32,lds=*i32,group_size=i32",
         {"NUM_PROGRAMS": 132, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}),
        (td_tile_copy, "x_ptr=*bf16,out_ptr=*bf16,rows=i32,cols=i32,ld=i32,row0=i32,col0=i32",
         {"BR": 64, "BC": 64, "PADDING": "nan"}),
        (td_row_blocks, "x_ptr=*fp32,out_ptr=*fp32,rows=i32,cols=i32", {"BR": 32, "BC": 64}),
        (td_choose, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32,use_y=i32", {"B": 256}),
        (td_3d, "x_ptr=*fp32,out_ptr=*fp32,d0=i32,d1=i32,d2=i32,s0=i32,s1=i32", {"B0": 2, "B1": 4, "B2": 16}),
    ]:
        assert kernel.compile(signature=signature, constexprs=constexprs, arch="sm_90a").asm["cubin"], kernel


# -- errors -----------------------------------------------------------------------------------------------
def _compile_error(body: str, signature: str = "x_ptr=*fp32,n=i32") -> CompilationError:
    """Compile a one-off kernel ``k(x_ptr, n)`` whose body is ``body`` and return its error."""
    source = ("import tlxc\nimport tlxc.language as tl\n\n\n@tlxc.jit\ndef k(x_ptr, n):\n"
              + textwrap.indent(textwrap.dedent(body), "    "))
    path = os.path.join(tempfile.mkdtemp(), "td_errors.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("td_errors", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.k.compile(signature=signature, arch="sm_90a")
    return info.value


D = "d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16])\n"


@pytest.mark.parametrize("body,message,line_text", [
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 2], [16, 16])\n",
     "strides[-1] must be 1, got 2", "[n, 2]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [1, n], [16, 16])\n",
     "strides[-1] must be 1, got a runtime scalar", "[1, n]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n], [16, 16])\n",
     "'strides' has 1 entries but 'shape' has 2", "[n]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16])\n",
     "'block_shape' has 1 entries but 'shape' has 2", "[16]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n, n, n, n, n], [n, n, n, n, n, 1], [1, 1, 1, 1, 1, 16])\n",
     "a tensor descriptor has 1 to 5 dimensions, but 'shape' has 6", "[n, n, n, n, n, n]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 24])\n",
     "'block_shape' must have power-of-two dimensions", "[16, 24]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 2])\n",
     "last dimension must hold at least 16 bytes, but block_shape[-1] = 2 elements of f32 is 8 bytes", "[16, 2]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, n])\n",
     "'block_shape' must be a compile-time constant", "[16, n]"),
    ("d = tl.make_tensor_descriptor(n, [n, n], [n, 1], [16, 16])\n",
     "'base' must be a scalar pointer", "n, [n, n]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, 2.5], [n, 1], [16, 16])\n",
     "'shape' must hold integers, but entry 1 is float 2.5", "[n, 2.5]"),
    ("d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 16], padding_option='inf')\n",
     "'padding_option' must be 'zero' or 'nan'", "'inf'"),
    (D + "t = d.load([0])\n", "'offsets' needs 2 entries", "[0]"),
    (D + "t = d.load([0, 1.5])\n", "'offsets' must hold integers, but entry 1 is float 1.5", "[0, 1.5]"),
    (D + "d.store([0, 0], tl.zeros((16, 8), dtype=tl.float32))\n", "'value' has shape [16, 8] but the descriptor",
     "tl.zeros((16, 8), dtype=tl.float32)"),
    (D + "d.store([0, 0], 1.0)\n", "'value' must be a tensor of the descriptor's block shape [16, 16]", "1.0"),
    (D + "s = d.blok_shape\n", "a tensor descriptor has no attribute 'blok_shape'; did you mean 'block_shape'?",
     "d.blok_shape"),
    ("t = tl.load_tensor_descriptor(x_ptr, [0, 0])\n", "'desc' must be a tensor descriptor", "x_ptr"),
    ("t = tl._experimental_descriptor_load(x_ptr, [0, 0], [16, 16], tl.float32)\n",
     "does not reinterpret a pointer to an encoded tensormap", "x_ptr"),
    (D + "t = tl._experimental_descriptor_load(d, [0, 0], [16, 32], tl.float32)\n",
     "'shape' [16, 32] differs from the descriptor's block_shape [16, 16]", "[16, 32]"),
    (D + "t = tl._experimental_descriptor_load(d, [0, 0], [16, 16], tl.float16)\n",
     "'dtype' is f16 (16 bits) but the descriptor holds f32 (32 bits)", "tl.float16"),
    (D + "for i in range(n):\n    d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 32])\n",
     "loop-carried tensor descriptor 'd'", "d = tl.make_tensor_descriptor(x_ptr, [n, n], [n, 1], [16, 32])"),
])
def test_errors_are_located(body, message, line_text):
    err = _compile_error(body)
    assert message in str(err), str(err)
    assert err.loc is not None and err.loc.file.endswith("td_errors.py"), str(err)
    line = linecache.getline(err.loc.file, err.loc.line)
    assert line_text in line[err.loc.col:], (str(err), line)


def test_nan_padding_and_bool_tensors_are_errors():
    err = _compile_error("d = tl.make_tensor_descriptor(x_ptr, [n], [1], [16], padding_option='nan')\n",
                         signature="x_ptr=*i32,n=i32")
    assert "padding_option='nan' needs a floating-point tensor, but it holds i32" in str(err), str(err)
    err = _compile_error("d = tl.make_tensor_descriptor(x_ptr, [n], [1], [16])\n", signature="x_ptr=*i1,n=i32")
    assert "bool is not supported" in str(err), str(err)


# -- on the GPU -------------------------------------------------------------------------------------------
def _rel_error(out, ref) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


@pytest.mark.gpu
# c's rows are 16-byte multiples (its desc.store is a TMA store through a map encoded in the kernel)
@pytest.mark.parametrize("M,N,K,subtile", [(512, 512, 512, False), (1000, 264, 200, True), (300, 200, 152, False)])
def test_gpu_persistent_matmul_matches_torch(M, N, K, subtile):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    programs = min(132, _cdiv(M, 128) * _cdiv(N, 128))
    td_persistent_matmul[(programs,)](a, b, c, M, N, K, NUM_PROGRAMS=programs, BLOCK_M=128, BLOCK_N=128,
                                      BLOCK_K=64, GROUP_M=8, SUBTILE=subtile)
    torch.cuda.synchronize()
    assert not c.isnan().any()
    assert _rel_error(c, a.double() @ b.double().T) < 2e-3


@pytest.mark.gpu
def test_gpu_grouped_matmul_matches_torch():
    # the sizes come from a tensor, so nothing is known of n: c's desc.store is the element store,
    # exact for any n (frontend/descriptor_methods.py: _store_by_width)
    problems = [(300, 200, 128), (129, 64, 256), (64, 520, 72)]
    a_parts, b_parts, starts, lds, sizes, c_views = [], [], [], [], [], []
    a_len = b_len = c_len = 0
    for m, n, k in problems:
        lda, ldb, ldc = k + 8, k, (n + 15) // 8 * 8        # ldc: 16-byte rows (TMA stores)
        a_parts.append(torch.randn(m * lda, device="cuda", dtype=torch.float16))
        b_parts.append(torch.randn(n * ldb, device="cuda", dtype=torch.float16))
        starts += [a_len, b_len, c_len]
        lds += [lda, ldb, ldc]
        sizes += [m, n, k]
        a_len, b_len = a_len + m * lda, b_len + n * ldb
        c_views.append((c_len, ldc))
        c_len += m * ldc
    a, b = torch.cat(a_parts), torch.cat(b_parts)
    c = torch.full((c_len,), float("nan"), device="cuda", dtype=torch.float16)
    as_i32 = lambda v: torch.tensor(v, device="cuda", dtype=torch.int32)  # noqa: E731
    td_grouped_matmul[(132,)](a, b, c, as_i32(sizes), as_i32(starts), as_i32(lds), len(problems),
                              NUM_PROGRAMS=132, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    torch.cuda.synchronize()
    for g, (m, n, k) in enumerate(problems):
        ag = a[starts[3 * g]:starts[3 * g] + m * lds[3 * g]].view(m, -1)[:, :k]
        bg = b[starts[3 * g + 1]:starts[3 * g + 1] + n * lds[3 * g + 1]].view(n, -1)[:, :k]
        start, ldc = c_views[g]
        cg = c[start:start + m * ldc].view(m, ldc)
        assert _rel_error(cg[:, :n], ag.double() @ bg.double().T) < 2e-3, g
        assert cg[:, n:].isnan().all(), g


@pytest.mark.gpu
@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_gpu_padding_and_guarded_store(padding, monkeypatch):
    # the element path: 45 and 91 f32 columns are no 16-byte multiples, which TMA stores overrun (an
    # in-kernel map stored through would trap, so this test opts out of device maps)
    monkeypatch.setenv("TLXC_DEVICE_TENSORMAPS", "0")
    rows, cols, ld = 27, 45, 48
    x = torch.randn(rows, ld, device="cuda")
    out = torch.full((32, 64), -7.0, device="cuda")
    td_tile_copy[(1,)](x, out, rows, cols, ld, 0, 0, BR=32, BC=64, PADDING=padding)
    buf = torch.full((80, 128), float("nan"), device="cuda")
    td_fill[(_cdiv(77, 32), _cdiv(91, 64))](buf, 77, 91, 128, 0.25, BR=32, BC=64)
    torch.cuda.synchronize()
    expected = torch.full((32, 64), float("nan") if padding == "nan" else 0.0, device="cuda")
    expected[:rows, :cols] = x[:, :cols]
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(1.5), expected.nan_to_num(1.5))
    filled = torch.full((80, 128), float("nan"), device="cuda")
    filled[:77, :91] = torch.arange(77 * 91, device="cuda", dtype=torch.float32).reshape(77, 91) + 0.25
    assert torch.equal(buf.isnan(), filled.isnan())
    assert torch.equal(buf.nan_to_num(0.0), filled.nan_to_num(0.0))
