"""What a compiled kernel shows of itself: every stage in ``k.asm``, resources in
``k.metadata``, ``TLXC_DUMP_DIR`` dumps, ``TLXC_OVERRIDE_DIR`` swaps, and readable
kernel symbols (``softmax_kernel_BLOCK8192``) for Nsight and the torch profiler.

Compiling needs NVRTC only, so everything but the launch tests runs without a GPU."""
from __future__ import annotations

import pytest

import tlxc
import tlxc.language as tl
from tlxc.frontend.naming import MAX_SYMBOL_LENGTH, format_value, make_symbol

SIGNATURE = "out_ptr=*fp32,in_ptr=*fp32,n=i32"


@tlxc.kernel
def scale_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr = 2.5,
                 MASKED: tl.constexpr = True):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=mask) * FACTOR, mask=mask)
    else:
        tl.store(out_ptr + offs, tl.load(in_ptr + offs) * FACTOR)


@tlxc.kernel
def plain_kernel(out_ptr, in_ptr, n):
    offs = tl.program_id(0) * 128 + tl.arange(0, 128)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=mask), mask=mask)


@tlxc.kernel
def copy_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for name in ("TLXC_DUMP_DIR", "TLXC_OVERRIDE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path / "cache"))


def compile_scale(**constexprs):
    return scale_kernel.compile(SIGNATURE, {"BLOCK": 256, **constexprs}, arch="sm_90a")


# -- k.asm and k.metadata ----------------------------------------------------------------------------

def test_every_stage_and_the_resources_are_kept_on_the_compiled_kernel():
    k = scale_kernel.compile(SIGNATURE, {"BLOCK": 256}, arch="sm_90a",
                             stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    assert set(k.asm) >= {"ir", "ir.opt", "cuda", "ptx", "cubin", "stats"}
    assert k.asm["cubin"][:4] == b"\x7fELF" and ".entry scale_kernel_BLOCK256" in k.asm["ptx"]
    for key in ("name", "threads", "registers", "spills_bytes", "shared_bytes", "num_warps"):
        assert key in k.metadata, key
    assert k.metadata["threads"] == 128 and k.metadata["registers"] > 0 and k.metadata["override"] is None
    assert k.asm["stats"].startswith("kernel scale_kernel [scale_kernel_BLOCK256_FACTOR2p5_MASKED1] (sm_90a)")


# -- readable symbols --------------------------------------------------------------------------------

def test_the_cuda_symbol_names_the_constexprs_and_the_ir_keeps_the_python_name():
    k = compile_scale()
    symbol = "scale_kernel_BLOCK256_FACTOR2p5_MASKED1"
    assert k.metadata["name"] == symbol
    assert f" {symbol}(" in k.asm["cuda"]
    assert symbol.encode() in k.asm["cubin"]
    assert k.module.kernels[0].attrs["sym_name"] == "scale_kernel"
    assert k.asm["ir"].startswith("tl.kernel @scale_kernel(")


def test_specializations_get_distinct_symbols():
    names = {compile_scale(BLOCK=b, MASKED=m).metadata["name"] for b in (128, 256) for m in (True, False)}
    assert len(names) == 4


def test_a_kernel_without_constexprs_keeps_its_name():
    k = plain_kernel.compile(SIGNATURE, arch="sm_90a")
    assert k.metadata["name"] == "plain_kernel"
    assert "symbol" not in k.module.kernels[0].attrs


def test_symbol_values_are_c_identifiers():
    assert format_value(True) == "1" and format_value(False) == "0"
    assert format_value(-3) == "m3" and format_value(1e-05) == "1em05" and format_value(0.5) == "0p5"
    assert format_value((64, 32)) == "64x32" and format_value(None) == "none"
    assert format_value(tl.bfloat16) == "bf16" and format_value("ieee") == "ieee"
    assert make_symbol("k", ["ACTgelu tanh", "B__X4"]) == "k_ACTgelu_tanh_B_X4"
    assert make_symbol("k", []) == "k"


def test_long_symbols_are_cut_with_a_hash_that_keeps_them_distinct():
    parts = [f"BLOCK_SIZE_DIMENSION_{i}{1 << i}" for i in range(12)]
    first = make_symbol("a_rather_long_kernel_name", parts)
    second = make_symbol("a_rather_long_kernel_name", parts[:-1] + ["BLOCK_SIZE_DIMENSION_11999"])
    assert len(first) <= MAX_SYMBOL_LENGTH and len(second) <= MAX_SYMBOL_LENGTH
    assert first != second and first.startswith("a_rather_long_kernel_name_BLOCK_SIZE_DIMENSION_0")
    assert first.replace("_", "").isalnum()


# -- dumps and overrides -----------------------------------------------------------------------------

def _only(directory, pattern: str):
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def test_dump_dir_writes_every_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_DUMP_DIR", str(tmp_path / "dump"))
    k = compile_scale()
    stem = tmp_path / "dump" / k.metadata["artifact"]
    assert stem.name.startswith("scale_kernel_BLOCK256_FACTOR2p5_MASKED1-")
    for suffix in ("ir", "opt.ir", "cu", "cubin", "txt"):
        assert (stem.parent / f"{stem.name}.{suffix}").exists(), suffix
    assert (stem.parent / f"{stem.name}.ir").read_text() == k.asm["ir"]
    assert (stem.parent / f"{stem.name}.opt.ir").read_text() == k.asm["ir.opt"]
    assert (stem.parent / f"{stem.name}.cu").read_text() == k.asm["cuda"]
    assert (stem.parent / f"{stem.name}.cubin").read_bytes() == k.asm["cubin"]
    assert (stem.parent / f"{stem.name}.txt").read_text() == k.asm["stats"]


def test_override_dir_compiles_the_hand_edited_source(tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    monkeypatch.setenv("TLXC_DUMP_DIR", str(dump))
    original = compile_scale()
    monkeypatch.delenv("TLXC_DUMP_DIR")
    path = _only(dump, "scale_kernel_BLOCK256_FACTOR2p5_MASKED1-*.cu")
    edited = ("// hand-edited for an experiment\n__device__ int tlxc_override_marker = 42;\n"
              + path.read_text())
    path.write_text(edited)
    monkeypatch.setenv("TLXC_OVERRIDE_DIR", str(dump))
    overridden = compile_scale()
    assert overridden.asm["cuda"] == edited
    assert overridden.metadata["override"] == str(path)
    assert overridden.asm["cubin"] != original.asm["cubin"]
    assert b"tlxc_override_marker" in overridden.asm["cubin"]
    other = compile_scale(BLOCK=128)                  # another specialization: another file name
    assert other.metadata["override"] is None and "tlxc_override_marker" not in other.asm["cuda"]


@pytest.mark.parametrize("other", [{"signature": "out_ptr=*fp16,in_ptr=*fp16,n=i32"},
                                   {"signature": "out_ptr=*fp32,in_ptr=*fp32,n=i32:16"},
                                   {"num_warps": 8}, {"arch": "sm_100a"}],
                         ids=["dtype", "divisibility", "num_warps", "arch"])
def test_specializations_sharing_a_symbol_get_their_own_dump_and_override(tmp_path, monkeypatch, other):
    """The symbol names only the constexprs: an f16 and an f32 compile (or other warps, alignment,
    target) would overwrite each other's dump and swap in each other's edited source."""
    dump = tmp_path / "dump"
    monkeypatch.setenv("TLXC_DUMP_DIR", str(dump))
    options = {"signature": SIGNATURE, "arch": "sm_90a", **other}

    def compile_other():
        return scale_kernel.compile(options["signature"], {"BLOCK": 256},
                                    **{k: v for k, v in options.items() if k != "signature"})
    first, second = compile_scale(), compile_other()
    assert first.metadata["name"] == second.metadata["name"]           # one symbol
    assert first.metadata["artifact"] != second.metadata["artifact"]   # two files
    for k in (first, second):
        assert (dump / f"{k.metadata['artifact']}.cu").read_text() == k.asm["cuda"]
    monkeypatch.delenv("TLXC_DUMP_DIR")
    path = dump / f"{first.metadata['artifact']}.cu"
    path.write_text("__device__ int tlxc_override_marker = 42;\n" + path.read_text())
    monkeypatch.setenv("TLXC_OVERRIDE_DIR", str(dump))
    assert compile_scale().metadata["override"] == str(path)
    assert compile_other().metadata["override"] != str(path)


def test_compiled_kernels_is_empty_before_any_gpu_launch():
    assert plain_kernel.compiled_kernels() == []


# -- on the GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_launch_returns_the_compiled_kernel_with_a_readable_name():
    import torch
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        k = scale_kernel[(4,)](out, x, 1000, BLOCK=256)
        torch.cuda.synchronize()
    torch.testing.assert_close(out, x * 2.5)
    assert k.metadata["name"] == "scale_kernel_BLOCK256_FACTOR2p5_MASKED1"
    assert k in scale_kernel.compiled_kernels()
    assert "scale_kernel_BLOCK256_FACTOR2p5_MASKED1" in {event.name for event in prof.events()}


@pytest.mark.gpu
def test_gpu_launch_honours_dump_and_override(tmp_path, monkeypatch):
    import torch
    monkeypatch.setenv("TLXC_CACHE_DISABLE", "1")     # a disk-cache hit would skip the dump
    monkeypatch.setenv("TLXC_DUMP_DIR", str(tmp_path))
    x = torch.randn(300, device="cuda")
    out = torch.empty_like(x)
    copy_kernel[(3,)](out, x, 300, BLOCK=128)
    path = _only(tmp_path, "copy_kernel_BLOCK128-*.cu")
    assert path.with_suffix(".cubin").exists()
    monkeypatch.delenv("TLXC_DUMP_DIR")
    monkeypatch.setenv("TLXC_OVERRIDE_DIR", str(tmp_path))
    path.write_text("__device__ int tlxc_override_marker = 42;\n" + path.read_text())
    copy_kernel.cache.clear()
    copy_kernel.fast_cache.clear()
    k = copy_kernel[(3,)](out, x, 300, BLOCK=128)
    torch.cuda.synchronize()
    assert k.metadata["override"] == str(path) and "tlxc_override_marker" in k.asm["cuda"]
    torch.testing.assert_close(out, x)


# -- NVTX ----------------------------------------------------------------------------------------------

class RecordingRanges:
    def __init__(self):
        self.events = []

    def range_push(self, name):
        self.events.append(("push", name))

    def range_pop(self):
        self.events.append(("pop",))


def test_nvtx_wrap_is_the_identity_unless_asked(monkeypatch):
    from tlxc.runtime import nvtx
    monkeypatch.delenv("TLXC_NVTX", raising=False)

    def launch(*args):
        return args
    assert nvtx.wrap(launch, "k_BLOCK8") is launch


def test_nvtx_wrap_brackets_each_launch_with_a_named_range(monkeypatch):
    from tlxc.runtime import nvtx
    monkeypatch.setenv("TLXC_NVTX", "1")
    ranges = RecordingRanges()
    calls = []
    wrapped = nvtx.wrap(lambda *args: calls.append(args) or "launched", "k_BLOCK8", ranges=ranges)
    assert wrapped((1, 1, 1), (128, 1, 1)) == "launched"
    assert calls == [((1, 1, 1), (128, 1, 1))]
    assert ranges.events == [("push", "k_BLOCK8"), ("pop",)]

    def failing(*args):
        raise RuntimeError("launch failed")
    with pytest.raises(RuntimeError):
        nvtx.wrap(failing, "k", ranges=ranges)()
    assert ranges.events[-2:] == [("push", "k"), ("pop",)]
