"""Buffer aliasing (``tlx.local_alloc(..., reuse=buffers)``) and buffer
attributes (``.shape``, ``.dtype``).

An allocation with ``reuse=`` occupies the same shared-memory bytes as the
allocation it names, with its own shape, dtype and count; as in TLX, the
group's region is as large as its largest member.  The interpreter shares the
bytes (a write through one buffer is read, bit for bit, through the other) and
its race tracker sees one memory; ``allocate-shared`` gives the group one
offset; the CUDA backend addresses both from it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, RaceError, ResourceError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
I32 = tl.pointer_type(tl.int32)


@tlxc.kernel
def alias_words(x_ptr: F32, bits_ptr: I32, n: tl.int32, BLOCK: tl.constexpr):
    """Each program stores two BLOCK-float rows into ``rows`` and reads both
    back at once through ``pair``, a [2, BLOCK] int32 buffer on the same bytes:
    bits = the raw bits of x.  ``wide`` asks for more bytes than ``rows`` has
    (the group grows to 3 x BLOCK floats) and ``after`` comes after the group."""
    rows = tlx.local_alloc((BLOCK,), tl.float32, 2)
    pair = tlx.local_alloc((2, BLOCK), tl.int32, 1, reuse=rows)
    wide = tlx.local_alloc((BLOCK,), tl.float32, 3, reuse=pair)   # an alias of an alias: the same group
    after = tlx.local_alloc((BLOCK,), tl.float32, 1)
    offs = tl.arange(0, BLOCK)
    base = tl.program_id(0) * 2 * BLOCK
    for r in tl.static_range(2):
        idx = base + r * BLOCK + offs
        tlx.local_store(rows[r], tl.load(x_ptr + idx, mask=idx < n, other=0.0))
    tlx.local_store(after[0], tlx.local_load(wide[1]))      # wide[1] is rows[1]
    idx2 = base + tl.arange(0, 2)[:, None] * BLOCK + offs[None, :]
    tl.store(bits_ptr + idx2, tlx.local_load(pair[0]), mask=idx2 < n)
    tl.store(x_ptr + base + BLOCK + offs, tlx.local_load(after[0]) * 2.0, mask=base + BLOCK + offs < n)


@tlxc.kernel
def tma_alias(x_desc, bits_desc, out_ptr: I32, M: tl.int32, N: tl.int32, BM: tl.constexpr, BN: tl.constexpr,
              EARLY: tl.constexpr = False):
    """Two BM x BN float boxes land by TMA in ``tiles``; ``words`` (int32,
    reuse=tiles) reads them back: TMA-stored to ``bits`` and, plus one, stored
    to ``out``.  EARLY reads ``words`` before the barrier wait (a race)."""
    tiles = tlx.local_alloc((BM, BN), tl.float32, 2)
    words = tlx.local_alloc((BM, BN), tl.int32, 2, reuse=tiles)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    row0 = tl.program_id(0) * 2 * BM
    col = tl.program_id(1) * BN
    for s in tl.static_range(2):
        tlx.barrier_expect_bytes(bars[s], BM * BN * 4)
        tlx.async_descriptor_load(x_desc, tiles[s], [row0 + s * BM, col], bars[s])
    for s in tl.static_range(2):
        if EARLY:
            tlx.local_load(words[s])  # the early read
        tlx.barrier_wait(bars[s], 0)
        w = tlx.local_load(words[s])
        rows = row0 + s * BM + tl.arange(0, BM)[:, None]
        cols = col + tl.arange(0, BN)[None, :]
        tl.store(out_ptr + rows * N + cols, w + 1, mask=(rows < M) & (cols < N))
        tlx.async_descriptor_store(bits_desc, words[s], [row0 + s * BM, col])
    tlx.async_descriptor_store_wait(0)


BM, BN = 16, 32


def _tma_alias(x, interpret: bool, early: bool = False):
    m, n = x.shape
    bits = torch.full((m, n), -7, dtype=torch.int32, device=x.device)
    out = torch.full((m, n), -7, dtype=torch.int32, device=x.device)
    x_desc = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    bits_desc = tlxc.TensorDescriptor.from_tensor(bits, [BM, BN])
    grid = ((m + 2 * BM - 1) // (2 * BM), (n + BN - 1) // BN)
    launcher = tlxc.interpret(tma_alias) if interpret else tma_alias
    launcher[grid](x_desc, bits_desc, out, m, n, BM=BM, BN=BN, EARLY=early, num_warps=4)
    return bits, out


# -- the interpreter shares the bytes ------------------------------------------------------------
def test_interpreter_reads_through_an_alias_the_bits_written_through_the_other():
    n = 100                                          # not a multiple of 2 * BLOCK
    x = torch.randn(n)
    original = x.clone()
    bits = torch.full((n,), -7, dtype=torch.int32)
    tlxc.interpret(alias_words)[(2,)](x, bits, n, BLOCK=32)
    assert torch.equal(bits, original.view(torch.int32))
    doubled = torch.cat([original[32:64] * 2, original[96:100] * 2])     # wide[1] is rows[1]
    assert torch.equal(torch.cat([x[32:64], x[96:100]]), doubled)


@pytest.mark.parametrize("shape", [(32, 32), (50, 68)])
def test_interpreter_tma_through_an_alias(shape):
    x = torch.randn(*shape)
    bits, out = _tma_alias(x, interpret=True)
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(out, x.view(torch.int32) + 1)


def test_race_tracker_sees_the_alias_as_the_same_memory():
    with pytest.raises(RaceError) as info:
        _tma_alias(torch.randn(32, 32), interpret=True, early=True)
    text = info.value.render()
    assert "read of 'words'[0]" in text and "not ordered after the asynchronous TMA load" in text
    assert "the asynchronous TMA load of 'tiles'[0] was issued here" in text
    assert text.splitlines()[1].strip() == "tlx.local_load(words[s])  # the early read"


# -- allocation and code ------------------------------------------------------------------------
def _allocs(ir: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"%(\w+) = tlx\.local_alloc[^{]*\{offset = (\d+)", ir)}


def test_the_group_shares_one_offset_sized_for_its_largest_member():
    compiled = alias_words.compile(constexprs={"BLOCK": 32}, stages=("ir.opt", "cuda"))
    ir = compiled.asm["ir.opt"]
    assert _allocs(ir) == {"rows": 0, "pair": 0, "wide": 0, "after": 3 * 32 * 4}    # wide: 3 x 128 bytes
    assert "%pair = tlx.local_alloc %rows " in ir and "%wide = tlx.local_alloc %rows " in ir
    cuda = compiled.asm["cuda"]
    assert "int* pair = reinterpret_cast<int*>(tlx_smem + 0);" in cuda
    assert "float* after = reinterpret_cast<float*>(tlx_smem + 384);" in cuda


def test_the_alias_prints_parses_and_verifies():
    from tlxc.errors import VerificationError
    from tlxc.ir.parser import parse_module
    from tlxc.ir.printer import print_module
    from tlxc.ir.verifier import verify_module
    ir = alias_words.compile(constexprs={"BLOCK": 32}, stages=("ir",)).asm["ir"]
    module = parse_module(ir)
    verify_module(module)
    assert print_module(module) == ir
    chained = parse_module(ir.replace("%wide = tlx.local_alloc %rows", "%wide = tlx.local_alloc %pair"))
    with pytest.raises(VerificationError, match="a tlx.local_alloc that reuses nothing itself"):
        verify_module(chained)


def test_tma_alias_compiles_to_an_sm90a_cubin():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    x = torch.randn(64, 64)
    args = {"x_desc": tlxc.TensorDescriptor.from_tensor(x, [BM, BN]),
            "bits_desc": tlxc.TensorDescriptor.from_tensor(x.view(torch.int32), [BM, BN]),
            "out_ptr": x.view(torch.int32), "M": 64, "N": 64, "BM": BM, "BN": BN, "EARLY": False}
    compiled = compile_kernel(tma_alias, specialization_from_args(tma_alias, args), arch="sm_90a", num_warps=4)
    allocs = _allocs(compiled.asm["ir.opt"])
    assert allocs["words"] == allocs["tiles"]
    # the GPU test reads TMA-written bytes through the alias: both must get the same swizzle
    swizzles = dict(re.findall(r"%(\w+) = tlx\.local_alloc[^{]*\{offset = \d+, swizzle = (\d+)", compiled.asm["ir.opt"]))
    assert swizzles["words"] == swizzles["tiles"] == "128"
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_a_group_too_large_for_shared_memory_is_reported_with_its_members():
    @tlxc.kernel
    def grows(out_ptr: F32):
        small = tlx.local_alloc((64,), tl.float32, 1)
        big = tlx.local_alloc((256, 256), tl.float32, 1, reuse=small)
        tl.store(out_ptr + tl.arange(0, 64), tlx.local_load(small[0]))
        tlx.local_store(big[0], tl.zeros((256, 256), tl.float32))

    with pytest.raises(ResourceError) as info:
        grows.compile(stages=("ir.opt",))
    assert "need 262144 bytes" in info.value.message
    assert "small: 1 x 64 f32, shared with big (reuse=) = 262144 bytes" in info.value.message


# -- errors -------------------------------------------------------------------------------------
@tlxc.kernel
def bad_reuse(out_ptr: F32, WHAT: tl.constexpr):
    a = tlx.local_alloc((16, 16), tl.float16, 2)
    if WHAT == "barrier":
        tlx.local_alloc((16,), tl.float32, 1, reuse=tlx.alloc_barriers(1, 1))  # WHAT barrier
    elif WHAT == "int":
        tlx.local_alloc((16,), tl.float32, 1, reuse=3)  # WHAT int
    elif WHAT == "view":
        tlx.local_alloc((16,), tl.float32, 1, reuse=a[1])  # WHAT view
    tl.store(out_ptr, 0.0)


@pytest.mark.parametrize("what, message", [
    ("barrier", "'reuse' must be a buffer array from tlx.local_alloc, got an mbarrier array"),
    ("int", "'reuse' must be a buffer array from tlx.local_alloc, got int 3"),
    ("view", "'reuse' must be a whole allocation (the result of tlx.local_alloc), not a view of one"),
])
def test_a_reuse_of_something_else_is_a_located_error(what, message):
    with pytest.raises(CompilationError) as info:
        bad_reuse.compile(constexprs={"WHAT": what}, stages=("ir",))
    assert message in info.value.message
    lines = Path(__file__).read_text().splitlines()
    assert lines[info.value.loc.line - 1].endswith(f"# WHAT {what}")


# -- .shape and .dtype of buffers ----------------------------------------------------------------
@tlxc.kernel
def buffer_attributes(out_ptr: I32, BM: tl.constexpr, BN: tl.constexpr):
    """out = [buffer shape dims..., array shape dims..., transposed view dims...,
    dtype bytes]: TLX's buffered_tensor.shape is one buffer's shape."""
    bufs = tlx.local_alloc((BM, BN), tl.float16, 3)
    buf = tlx.local_view(bufs, 1)
    t = tlx.local_trans(buf)
    tl.store(out_ptr + 0, buf.shape[0])
    tl.store(out_ptr + 1, buf.shape[1])
    tl.store(out_ptr + 2, bufs.shape[0])
    tl.store(out_ptr + 3, len(bufs.shape))
    tl.store(out_ptr + 4, t.shape[0])
    tl.store(out_ptr + 5, tlx.size_of(buf.dtype))
    tlx.local_store(buf, tl.zeros(buf.shape, buf.dtype))          # the attributes as a kernel uses them


def test_buffer_shape_and_dtype():
    out = torch.full((6,), -1, dtype=torch.int32)
    tlxc.interpret(buffer_attributes)[(1,)](out, BM=64, BN=16)
    assert out.tolist() == [64, 16, 64, 2, 16, 2]


def test_unknown_buffer_attribute_is_a_located_error():
    @tlxc.kernel
    def bad(out_ptr: I32):
        bufs = tlx.local_alloc((16, 16), tl.float16, 2)
        tl.store(out_ptr, bufs.num)

    with pytest.raises(CompilationError, match=r"a shared-memory buffer has no attribute 'num' \(it has shape "
                                               r"and dtype\)"):
        bad.compile(stages=("ir",))


# -- on the GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(32, 32), (200, 132)])
def test_gpu_tma_through_an_alias(shape):
    x = torch.randn(*shape, device="cuda")
    bits, out = _tma_alias(x, interpret=False)
    torch.cuda.synchronize()
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(out, x.view(torch.int32) + 1)
