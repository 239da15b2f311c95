"""TMA descriptors encoded in the kernel (tl.make_tensor_descriptor, tlx.allocate_tensor_descriptor /
make_tensor_descriptor(desc_ptr=) / reinterpret_tensor_descriptor): one kernel per feature
(tests/kernels_tensormap_device.py).  CPU: the interpreter against torch (fresh random data,
NaN-poisoned outputs, shapes that are not box multiples), the checker, sm_90a and sm_100a cubins
whose PTX encodes the map (tensormap.replace) and copies by TMA, located errors.  gpu: the GPU
against torch and against the interpreter (TLXC_DEBUG_BARRIERS=1 recommended)."""
from __future__ import annotations

import re

import kernels_tensormap_device as K
import pytest
import torch

from tlxc.check import ERROR
from tlxc.compiler import check_function, compile_kernel
from tlxc.errors import CompilationError, TlxcError
from tlxc.frontend.specialize import parse_signature, signature_hints, specialization_from_types
from tlxc.interpreter import interpret


@pytest.fixture(autouse=True)
def _device_tensormaps(monkeypatch):
    """The encoding is the default (tensor_desc.device_tensormaps): run without the opt-out."""
    monkeypatch.delenv("TLXC_DEVICE_TENSORMAPS", raising=False)

M, N = 70, 80                  # not multiples of the [32, 64] box; N divisible by 16 (desc.store by TMA at launch)
BOX = {"BM": 32, "BN": 64}
GRID = (3, 2)


def _seeded() -> torch.Generator:
    return torch.Generator().manual_seed(torch.seed() % 2**31)


def _cases(device: str):
    """(kernel, grid, args, constexprs, outputs, expected) per feature, on ``device``."""
    g = _seeded()
    x = torch.randn(M, N, generator=g).to(device)
    xh = torch.randn(M, 80, generator=g).half().to(device)
    x1 = torch.randn(200, generator=g).to(device)
    xb = torch.randn(M, N, generator=g).bfloat16().to(device)
    xi = torch.randint(-100, 100, (M, 80), generator=g, dtype=torch.int8).to(device)
    yb = torch.full((M, N), float("nan"), device=device).bfloat16()
    yi = torch.full((M, 80), 77, dtype=torch.int8, device=device)
    nan = float("nan")
    y = [torch.full((M, N), nan, device=device) for _ in range(4)]
    yh = torch.full((M, 80), nan, device=device).half()
    y1 = torch.full((200,), nan, device=device)
    iota = torch.arange(M * N, dtype=torch.float32, device=device).view(M, N)
    scaled = yh.clone()
    scaled[:, :64] = (xh[:, :64].double() * 3 + 1).half()   # 64 f16: divisible by 16, so desc.store is TMA
    yn = torch.full((M, 80), nan, device=device).half()
    narrow = yn.clone()
    narrow[:, :75] = (xh[:, :75].double() * 3 + 1).half()   # 75 f16 = 150 bytes: desc.store's element branch
    return {
        "desc_load_store": (K.tm_scale_rows, GRID, (xh, yh, M, 64, 80), BOX, yh, scaled),
        "desc_store_narrow": (K.tm_scale_rows, GRID, (xh, yn, M, 75, 80), BOX, yn, narrow),
        "async_load_mbarrier": (K.tm_async_pair, GRID, (x, y[0], M, N), BOX, y[0], -x),
        "async_store": (K.tm_store_iota, GRID, (y[1], M, N), BOX, y[1], iota),
        "prefetch": (K.tm_prefetched_copy, GRID, (x, y[2], M, N), BOX, y[2], x),
        "tlx_slots": (K.tm_slots_copy, (4,), (x1, y1, 200), {"B": 64}, y1, x1 + 0.5),
        "warp_specialized": (K.tm_ws_copy, GRID, (x, y[3], M, N), BOX, y[3], 2 * x),
        # other element types: bf16 (elemtype 10, 128-byte swizzle) and int8 (elemtype 0, 64-byte swizzle)
        "async_load_bf16": (K.tm_async_pair, GRID, (xb, yb, M, N), BOX, yb, -xb),
        "async_load_int8": (K.tm_async_pair, (3, 2), (xi, yi, M, 80), BOX, yi, -xi),
    }


SIGNATURES = {
    "desc_load_store": (K.tm_scale_rows, "x_ptr=*fp16,y_ptr=*fp16,M=i32,N=i32:16,ld=i32:16", BOX),
    "desc_store_narrow": (K.tm_scale_rows, "x_ptr=*fp16,y_ptr=*fp16,M=i32,N=i32,ld=i32:16", BOX),
    "async_load_mbarrier": (K.tm_async_pair, "x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32", BOX),
    "async_store": (K.tm_store_iota, "y_ptr=*fp32,M=i32,N=i32", BOX),
    "prefetch": (K.tm_prefetched_copy, "x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32:16", BOX),
    "tlx_slots": (K.tm_slots_copy, "x_ptr=*fp32,y_ptr=*fp32,n=i32", {"B": 64}),
    "warp_specialized": (K.tm_ws_copy, "x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32:16", BOX),
    "async_load_bf16": (K.tm_async_pair, "x_ptr=*bf16,y_ptr=*bf16,M=i32,N=i32", BOX),
    "async_load_int8": (K.tm_async_pair, "x_ptr=*i8,y_ptr=*i8,M=i32,N=i32", BOX),
}


def _spec(kernel, signature: str, constexprs: dict):
    """The specialization of a signature with its hints (``N=i32:16``: divisible by 16, as a launch with such
    a size finds out)."""
    return specialization_from_types(kernel, parse_signature(signature), constexprs, signature_hints(signature))


def _equal_with_nan(out: torch.Tensor, ref: torch.Tensor) -> bool:
    out, ref = out.double().cpu(), ref.double().cpu()
    return torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.nan_to_num(7.5), ref.nan_to_num(7.5))


@pytest.mark.parametrize("feature", sorted(SIGNATURES))
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_interpreter_matches_torch(feature, arch):
    kernel, grid, args, constexprs, out, expected = _cases("cpu")[feature]
    interpret(kernel, grid, args, constexprs, arch=arch)
    assert _equal_with_nan(out, expected), feature


@pytest.mark.parametrize("feature", sorted(f for f in SIGNATURES if f != "desc_store_narrow"))  # (no TMA op)
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_cubin_encodes_the_map_and_copies_by_tma(feature, arch):
    kernel, signature, constexprs = SIGNATURES[feature]
    spec = _spec(kernel, signature, constexprs)
    assert not [f for f in check_function(kernel, spec, arch=arch) if f.severity == ERROR]
    compiled = compile_kernel(kernel, spec, arch=arch, stages=("ir", "cuda", "ptx", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx = compiled.asm["ptx"]
    for instruction in ("tensormap.replace.tile.global_address.global.b1024.b64",
                        "tensormap.replace.tile.swizzle_mode", "fence.proxy.tensormap::generic.release.gpu",
                        "fence.proxy.tensormap::generic.acquire.gpu", "cp.async.bulk.tensor"):
        assert instruction in ptx, (feature, instruction)
    assert "mbarrier.complete_tx" not in ptx           # the box is a TMA copy, not the task's own
    # 128 bytes per map a TMA op uses (desc.load is an element load: tensor_desc.DESC_LOAD_BY_TMA)
    per_program = compiled.metadata.get("global_scratch_bytes")
    assert per_program == (128 if feature in ("async_store", "desc_load_store") else 256), per_program
    codes = {"async_load_bf16": ("replace_elemtype<10>", "replace_swizzle_mode<3>"),
             "async_load_int8": ("replace_elemtype<0>", "replace_swizzle_mode<2>"),
             "async_load_mbarrier": ("replace_elemtype<7>", "replace_swizzle_mode<3>")}
    for text in codes.get(feature, ()):
        assert text in compiled.asm["cuda"], (feature, text)
    assert compiled.metadata["params"][-1] == "u64"     # the scratch: a hidden last parameter
    # each acquire is followed by an empty bulk group waited for, as Triton's (a ptxas that
    # drops the acquire's ordering otherwise lets a copy read the slot's previous map)
    assert re.search(r"fence\.proxy\.tensormap::generic\.acquire\.gpu \[%rd\d+\], 128;\s*"
                     r"cp\.async\.bulk\.commit_group;\s*cp\.async\.bulk\.wait_group\.read 0;", ptx), feature


def test_checker_counts_the_box_bytes_of_an_in_kernel_map():
    """tlxc check sees the map's box like a host descriptor's: expecting fewer bytes than the TMA
    load completes is an error."""
    import tlxc
    import tlxc.language as tl
    from tlxc.language import tlx

    @tlxc.jit
    def short_expect(x_ptr, M, N):
        d = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[32, 32])
        buf = tlx.local_alloc((32, 32), tl.float32, 1)
        bar = tlx.alloc_barriers(num_barriers=1)
        tlx.barrier_expect_bytes(bar[0], 2048)           # the box is 4096 bytes
        tlx.async_descriptor_load(d, buf[0], [0, 0], bar[0])
        tlx.barrier_wait(bar[0], 0)

    spec = specialization_from_types(short_expect, parse_signature("x_ptr=*fp32,M=i32,N=i32"), {})
    errors = [f for f in check_function(short_expect, spec, arch="sm_90a") if f.severity == ERROR]
    assert any("TMA loads deliver 4096 bytes" in f.message and "announced 2048" in f.message for f in errors), errors


def test_sm80_keeps_the_element_copy():
    kernel, signature, constexprs = SIGNATURES["desc_load_store"]
    spec = _spec(kernel, signature, constexprs)
    ir = compile_kernel(kernel, spec, arch="sm_80", stages=("ir",)).asm["ir"]
    assert "tlx.make_tensor_descriptor" not in ir and "tl.load" in ir


def test_misaligned_row_stride_is_a_located_error_on_the_interpreter():
    """Refused where a TMA copy uses the map (the store), naming the line that built it (64 f16
    columns: a 16-byte multiple, so desc.store takes its TMA branch)."""
    x = torch.randn(40, 70).half()
    y = torch.zeros(40, 70).half()
    with pytest.raises(TlxcError, match=r"kernels_tensormap_device.py:\d+.*uses the tensor map built at line \d+: "
                                        r".*strides\[0\] is 70 elements of f16 = 140 bytes; TMA needs a positive "
                                        r"multiple of 16 bytes"):
        interpret(K.tm_scale_rows, (2, 1), (x, y, 40, 64, 70), BOX)


def test_desc_load_is_the_pipelinable_element_load_and_unused_maps_go():
    """desc.load of an in-kernel descriptor stays an element load (tensor_desc.DESC_LOAD_BY_TMA:
    staged TMA loads are not pipelined yet); the source's map, which no TMA op uses, is removed."""
    from tlxc.frontend import tensor_desc
    assert tensor_desc.DESC_LOAD_BY_TMA is False
    kernel, signature, constexprs = SIGNATURES["desc_load_store"]
    spec = _spec(kernel, signature, constexprs)
    compiled = compile_kernel(kernel, spec, arch="sm_90a", stages=("ir", "ir.opt"))
    assert compiled.asm["ir"].count("tlx.make_tensor_descriptor") == 2
    assert compiled.asm["ir.opt"].count("tlx.make_tensor_descriptor") == 1
    assert "tlx.async_descriptor_load" not in compiled.asm["ir"] and "tlx.async_descriptor_store" in compiled.asm["ir"]


def test_misaligned_stride_traps_on_the_gpu_located_with_debug_barriers():
    """The encoder checks the base and row strides at run time and traps; the located message is
    printed first only with TLXC_DEBUG_BARRIERS=1: a printf is a call, and a call anywhere in the
    kernel makes ptxas serialize its wgmma (C7510)."""
    kernel, signature, constexprs = SIGNATURES["desc_load_store"]
    spec = _spec(kernel, signature, constexprs)
    plain = compile_kernel(kernel, spec, arch="sm_90a", stages=("ir", "cuda", "ptx"))
    # dst's map (stored through): base, row stride, inner size (16-byte multiple for TMA stores)
    assert plain.asm["cuda"].count("__trap();") == 3 and "printf(" not in plain.asm["cuda"]
    assert "vprintf" not in plain.asm["ptx"]
    debug = compile_kernel(kernel, spec, arch="sm_90a", stages=("ir", "cuda"), debug_barriers=True).asm["cuda"]
    assert "kernels_tensormap_device.py:" in debug and "is not 16-byte aligned" in debug
    assert "TMA needs a positive multiple of 16 bytes below 2**40" in debug and "printf(" in debug
    assert "shape[1] is %lld elements of f16, not a multiple of 16 bytes: TMA stores write whole" in debug


def test_desc_store_goes_by_tma_only_where_the_inner_size_is_known_wide():
    """desc.store of an in-kernel descriptor stores by TMA when the map's inner size is known to
    be a 16-byte multiple (a kernel argument specialized as divisible by 16, as a launch with
    such a size is), else by the element store: exact for any shape, where a TMA store would
    write past it."""
    kernel, signature, constexprs = SIGNATURES["desc_load_store"]         # N=i32:16
    ir = compile_kernel(kernel, _spec(kernel, signature, constexprs),
                        arch="sm_90a", stages=("ir",)).asm["ir"]
    assert "tlx.async_descriptor_store" in ir and "tl.store" not in ir
    kernel, signature, constexprs = SIGNATURES["desc_store_narrow"]       # N=i32: nothing known
    ir = compile_kernel(kernel, _spec(kernel, signature, constexprs),
                        arch="sm_90a", stages=("ir",)).asm["ir"]
    assert "tlx.async_descriptor_store" not in ir and "tl.store" in ir
    g = _seeded()
    x = torch.randn(M, 80, generator=g).half()
    for n in (75, 64):                                 # launched: 75 takes the element store, 64 TMA
        y = torch.full((M, 80), float("nan")).half()
        interpret(kernel, GRID, (x, y, M, n, 80), BOX)
        assert torch.equal(y[:, :n], (x[:, :n].double() * 3 + 1).half())
        assert y[:, n:].isnan().all()      # nothing written past the shape


def test_store_through_a_map_of_unaligned_inner_size_is_refused_by_the_interpreter():
    """A TMA store writes whole 16-byte chunks of the innermost dimension (H200, 2026-12-03), so
    an explicit TLX store through a map whose inner size (75 x f16 = 150 bytes) is not a 16-byte
    multiple is refused: the GPU's encode traps, the interpreter refuses the store with the same rule."""
    y = torch.zeros(M, 80).half()
    with pytest.raises(TlxcError, match=r"kernels_tensormap_device.py:\d+.*shape\[1\] is 75 elements of f16, not a "
                                        r"multiple of 16 bytes: TMA stores write whole 16-byte chunks"):
        interpret(K.tm_store_ones, GRID, (y, M, 75, 80), BOX)
    assert not y.any()      # refused before anything was written


def test_reinterpret_with_another_box_is_a_located_error():
    import tlxc
    import tlxc.language as tl
    from tlxc.language import tlx

    @tlxc.jit
    def wrong_box(x_ptr, n):
        slots = tlx.allocate_tensor_descriptor(num=1)
        tlx.make_tensor_descriptor(desc_ptr=slots[0], base=x_ptr, shape=[n], strides=[1], block_shape=[64])
        d = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[0], block_shape=[32], dtype=tl.float32)
        d.store([0], d.load([0]))

    spec = specialization_from_types(wrong_box, parse_signature("x_ptr=*fp32,n=i32"), {})
    with pytest.raises(TlxcError, match=r"test_tensormap_device.py:\d+.*encoded for boxes of \[64\] x f32, not "
                                        r"\[32\] x f32"):
        compile_kernel(wrong_box, spec, arch="sm_90a", stages=("ir",))


def test_box_wider_than_tma_allows_falls_back_to_element_copies():
    """A box TMA cannot copy (rows of more than 256 elements in a box of two rows: no 128-byte
    spans, no single row) gets no tensor map: desc.load/store are masked loads and stores, as on
    targets without TMA.  A single row of 512 is copied in two pieces (tests/test_tma_wide_boxes.py)."""
    import tlxc
    import tlxc.language as tl

    @tlxc.jit
    def wide(x_ptr, y_ptr, n, R: tl.constexpr, B: tl.constexpr):
        src = tl.make_tensor_descriptor(x_ptr, shape=[2, n], strides=[n, 1], block_shape=[R, B])
        dst = tl.make_tensor_descriptor(y_ptr, shape=[2, n], strides=[n, 1], block_shape=[R, B])
        dst.store([0, tl.program_id(0) * B], src.load([0, tl.program_id(0) * B]))

    x, y = torch.randn(2, 1000), torch.full((2, 1000), float("nan"))
    interpret(wide, (2,), (x, y, 1000), {"R": 2, "B": 512})
    assert torch.equal(x, y)
    sig = parse_signature("x_ptr=*fp32,y_ptr=*fp32,n=i32")
    ir = compile_kernel(wide, specialization_from_types(wide, sig, {"R": 2, "B": 512}), arch="sm_90a",
                        stages=("ir",)).asm["ir"]
    assert "tlx.make_tensor_descriptor" not in ir
    one_row = compile_kernel(wide, specialization_from_types(wide, sig, {"R": 1, "B": 512}), arch="sm_90a",
                             stages=("ir",)).asm["ir"]
    assert "tlx.make_tensor_descriptor" in one_row


_GPU_KNOWN_WRONG: dict = {}   # (desc_load_store's overrun, H200 2026-12-03: TMA stores write whole 16-byte
# chunks; a map of such an inner size is now refused, and the case uses 72 columns)


@pytest.mark.gpu
@pytest.mark.parametrize("feature", [pytest.param(f, marks=pytest.mark.xfail(reason=_GPU_KNOWN_WRONG[f], strict=False))
                                     if f in _GPU_KNOWN_WRONG else f for f in sorted(SIGNATURES)])
def test_gpu_matches_torch_and_the_interpreter(feature):
    import tlxc
    kernel, grid, args, constexprs, out, expected = _cases("cuda")[feature]
    calls = []

    def allocator(size, align, stream):
        calls.append((size, align))
        return torch.empty(size, dtype=torch.int8, device="cuda")

    tlxc.set_allocator(allocator)
    try:
        kernel[grid](*args, **constexprs)
        torch.cuda.synchronize()
    finally:
        tlxc.set_allocator(None)
    if feature == "desc_store_narrow":      # N = 75: element stores, no map left, no scratch asked for
        assert not calls
    else:
        assert calls and calls[0][1] == 128
    assert _equal_with_nan(out, expected), feature
    cpu_args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
    cpu_out = next(a for a, g in zip(cpu_args, args) if g is out)
    cpu_out.fill_(float("nan") if cpu_out.is_floating_point() else 77)
    interpret(kernel, grid, cpu_args, constexprs)
    assert _equal_with_nan(out, cpu_out), feature


def test_device_maps_are_the_default_and_zero_opts_out(monkeypatch):
    """Unset, the kernel encodes its map (tensormap.replace) and stores by TMA; with
    TLXC_DEVICE_TENSORMAPS=0 the same store is the element store, and TLX's descriptor slots are
    a located error naming the opt-out."""
    kernel, sig, meta = SIGNATURES["desc_load_store"]
    cuda = kernel.compile(sig, meta, arch="sm_90a", stages=("cuda",)).asm["cuda"]
    assert "tensormap.replace" in cuda and "cp.async.bulk.tensor" in cuda
    monkeypatch.setenv("TLXC_DEVICE_TENSORMAPS", "0")
    cuda = kernel.compile(sig, meta, arch="sm_90a", stages=("cuda",)).asm["cuda"]
    assert "tensormap.replace" not in cuda and "cp.async.bulk.tensor" not in cuda
    kernel, sig, meta = SIGNATURES["tlx_slots"]
    with pytest.raises(CompilationError, match="TLXC_DEVICE_TENSORMAPS=0"):
        kernel.compile(sig, meta, arch="sm_90a", stages=("ir",))
