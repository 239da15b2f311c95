"""Cache hints: ``cache_modifier=``, ``eviction_policy=`` and ``volatile=`` on ``tl.load`` /
``tl.store``, ``tlx.async_load`` (cp.async) and the TMA copies.

Each valid hint reaches the PTX as the qualifier Triton's lowering gives it (docs/codegen.md,
"Cache hints"), vectorized accesses keep their width, a bad value is a located error naming
the argument and the valid values, and hinted kernels compute what unhinted ones do (on the
interpreter, which ignores hints, and on the GPU: ``gpu`` marker).
"""
from __future__ import annotations

import kernels_cache_hints as K
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel, frontend, launch_warnings, perf_warnings
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module

N = 1000                      # not a multiple of the block
BLOCK = 2048                  # 16 elements per thread of 4 warps: 16-byte vectors of every dtype (Triton's cap)
NO_HINTS = {"LOAD_CACHE": "", "LOAD_EVICT": "", "VOLATILE": False, "STORE_CACHE": "", "STORE_EVICT": ""}


def _axpb_args(x, y, n, stride=1, **hints):
    return {"x_ptr": x, "y_ptr": y, "n": n, "STRIDE": stride, "BLOCK": BLOCK, **NO_HINTS, **hints}


def _axpb_spec(dtype=torch.float32, n=1024, stride=1, **hints):
    x, y = torch.zeros(2 * n, dtype=dtype), torch.zeros(n, dtype=dtype)
    return specialization_from_args(K.axpb, _axpb_args(x, y, n, stride, **hints))


def _ptx(kfn, spec, arch="sm_90a", **options):
    compiled = compile_kernel(kfn, spec, arch=arch, stages=("ir", "cuda", "ptx", "cubin"), **options)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    return compiled.asm["ptx"]


def _lines(ptx: str, word: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines() if word in line]


# -- tl.load / tl.store: the qualifiers in the PTX -------------------------------------------------

# (load hints, store hints, the load's instruction, the store's instruction): with a cache operator
# the L2 policy alone carries an eviction policy (PTX takes no L1 priority next to one)
ACCESS_CASES = [
    ({"LOAD_CACHE": ".ca"}, {"STORE_CACHE": ".wb"}, "ld.global.ca.v4.b32", "st.global.wb.v4.b32"),
    ({"LOAD_CACHE": ".cg", "LOAD_EVICT": "evict_first"}, {"STORE_CACHE": ".cg", "STORE_EVICT": "evict_last"},
     "ld.global.cg.L2::cache_hint.v4.b32", "st.global.cg.L2::cache_hint.v4.b32"),
    ({"LOAD_CACHE": ".cv", "LOAD_EVICT": "evict_last"}, {"STORE_CACHE": ".cs"},
     "ld.global.cv.L2::cache_hint.v4.b32", "st.global.cs.v4.b32"),
    ({"LOAD_EVICT": "evict_first"}, {"STORE_CACHE": ".wt", "STORE_EVICT": "evict_first"},
     "ld.global.L1::evict_first.L2::cache_hint.v4.b32", "st.global.wt.L2::cache_hint.v4.b32"),
    ({"VOLATILE": True}, {"STORE_EVICT": "evict_last"},
     "ld.volatile.global.v4.b32", "st.global.L1::evict_last.L2::cache_hint.v4.b32"),
]


@pytest.mark.parametrize("load,store,ld,st", ACCESS_CASES, ids=[c[2].split(".v4")[0] for c in ACCESS_CASES])
def test_hinted_vector_access_keeps_its_width(load, store, ld, st):
    ptx = _ptx(K.axpb, _axpb_spec(**load, **store))
    assert _lines(ptx, ld) and _lines(ptx, st), "\n".join(_lines(ptx, ".global"))
    for evict in ("evict_first", "evict_last"):
        if evict in (load.get("LOAD_EVICT"), store.get("STORE_EVICT")):
            assert _lines(ptx, f"createpolicy.fractional.L2::{evict}.b64"), ptx


def test_unhinted_access_is_unchanged():
    """No hint, or the spelled-out defaults ("evict_normal", None): the helpers of before."""
    for hints in ({}, {"LOAD_EVICT": "evict_normal", "STORE_EVICT": "evict_normal"}):
        cuda = compile_kernel(K.axpb, _axpb_spec(**hints), stages=("ir", "cuda")).asm["cuda"]
        assert "tlx_ld_global_b128(" in cuda and "tlx_st_global_b128(" in cuda
        assert "_hint_" not in cuda and "createpolicy" not in cuda


@pytest.mark.parametrize("dtype,ld", [(torch.int8, "ld.global.cg.L2::cache_hint.u8"),
                                      (torch.float16, "ld.global.cg.L2::cache_hint.u16")])
def test_element_wide_access_takes_the_hints(dtype, ld):
    """STRIDE 2: the load is element by element (8/16-bit instructions); the store stays vectorized."""
    ptx = _ptx(K.axpb, _axpb_spec(dtype, stride=2, LOAD_CACHE=".cg", LOAD_EVICT="evict_last", STORE_CACHE=".cs"))
    assert _lines(ptx, ld), "\n".join(_lines(ptx, ".global"))
    assert _lines(ptx, "st.global.cs.v4.b32"), "\n".join(_lines(ptx, ".global"))


@pytest.mark.parametrize("dtype,bits", [(torch.float64, "v2.b32"), (torch.int16, "u16")])
def test_scalar_access_takes_the_hints(dtype, bits):
    x, y = torch.zeros(4, dtype=dtype), torch.zeros(4, dtype=dtype)
    spec = specialization_from_args(K.scalar_copy, {"x_ptr": x, "y_ptr": y, **NO_HINTS, "VOLATILE": True,
                                                    "STORE_CACHE": ".wt"})
    ptx = _ptx(K.scalar_copy, spec, arch="sm_100a")
    assert _lines(ptx, f"ld.volatile.global.{bits}") and _lines(ptx, f"st.global.wt.{bits}"), ptx


def test_ir_carries_the_hints_and_round_trips():
    module = frontend(K.axpb, _axpb_spec(LOAD_CACHE=".cg", LOAD_EVICT="evict_first", STORE_CACHE=".wt"))
    text = print_module(module)
    load = next(line for line in text.splitlines() if "tl.load" in line)
    store = next(line for line in text.splitlines() if "tl.store" in line)
    assert 'cache = ".cg"' in load and 'eviction = "evict_first"' in load, load
    assert 'cache = ".wt"' in store and "eviction" not in store, store
    assert print_module(parse_module(text)) == text


# -- cp.async --------------------------------------------------------------------------------------

def _staged_spec(dtype=torch.float32, stride=64, cache="", evict=""):
    x, y = torch.zeros(64 * stride, dtype=dtype), torch.zeros(64 * 64, dtype=dtype)
    return specialization_from_args(K.staged_copy, {"x_ptr": x, "y_ptr": y, "M": 50, "N": 64, "stride_x": stride,
                                                    "BM": 32, "BN": 64, "CACHE": cache, "EVICT": evict})


@pytest.mark.parametrize("cache,evict,instruction", [
    ("", "", "cp.async.cg.shared.global [%r"),                           # Triton's choice for 16 bytes
    (".ca", "", "cp.async.ca.shared.global [%r"),
    (".cg", "evict_first", "cp.async.cg.shared.global [%r"),
    ("", "evict_last", "cp.async.cg.shared.global [%r"),
])
def test_cp_async_hints(cache, evict, instruction):
    """The cache operator reaches the cp.async; an eviction policy does not (ptxas can encode a hinted
    cp.async into an illegal instruction: ``codegen_nvptx/rules_tlx.py: _cp_async_hints``), and the
    kernel's performance warnings say so, naming the source line."""
    compiled = compile_kernel(K.staged_copy, _staged_spec(cache=cache, evict=evict), arch="sm_90a",
                              stages=("ir", "cuda", "ptx", "cubin"))
    ptx = compiled.asm["ptx"]
    copies = _lines(ptx, ".shared.global")
    assert copies and all(instruction.split(" [")[0] + " [" in c and ", 16, " in c for c in copies), "\n".join(copies)
    assert not _lines(ptx, "createpolicy") and not _lines(ptx, "L2::cache_hint")
    notes = [w for w in perf_warnings(compiled.metadata) if "cp.async is emitted without the L2 policy" in w]
    assert len(notes) == bool(evict) and all(f"eviction_policy={evict!r}) at kernels_cache_hints.py:" in n
                                             for n in notes), notes


def test_launch_warnings_are_the_severe_perf_warnings():
    """What a launch raises as ``tlxc.PerformanceWarning``: a dropped cp.async policy and serialized wgmma
    instructions, not spills or unpipelined loops (``--emit stats`` lists those)."""
    compiled = compile_kernel(K.staged_copy, _staged_spec(evict="evict_first"), arch="sm_90a",
                              stages=("ir", "cuda", "ptx", "cubin"))
    assert launch_warnings(compiled.metadata) == [w for w in perf_warnings(compiled.metadata) if "cp.async" in w] != []
    made_up = {"spills_bytes": 8, "registers": 255, "not_pipelined": ["a loop"],
               "wgmma_serialized": "C7510: wgmma.mma_async instructions are serialized"}
    assert launch_warnings(made_up) == [w for w in perf_warnings(made_up) if "serializes the wgmma" in w]
    assert len(launch_warnings(made_up)) == 1 and len(perf_warnings(made_up)) == 3
    assert launch_warnings({**made_up, "debug_barriers": True}) == []      # the watchdogs' calls, by design
    from tlxc.runtime.launch import _warn_performance  # what a first launch calls after compiling
    with pytest.warns(tlxc.PerformanceWarning, match=r"staged_copy: tlx.async_load\(eviction_policy='evict_first'\)"):
        _warn_performance(K.staged_copy, compiled.metadata)
    with pytest.warns(tlxc.PerformanceWarning, match="serializes the wgmma"):
        _warn_performance(K.staged_copy, made_up)


def test_cp_async_cg_on_narrow_copies_is_a_located_error():
    """An odd row stride: 4-byte copies, which cp.async.cg cannot make."""
    with pytest.raises(tlxc.CompilationError) as info:
        compile_kernel(K.staged_copy, _staged_spec(stride=65, cache=".cg"), stages=("ir", "cuda"))
    text = str(info.value)
    assert "cp.async.cg copies 16 bytes per thread, but these copies move 4 bytes" in text, text
    assert "kernels_cache_hints.py:" in text, text


def test_cp_async_narrower_than_4_bytes_reads_with_the_hints():
    """f16 with an odd stride: 2-byte pieces copied synchronously, through a hinted load."""
    ptx = _ptx(K.staged_copy, _staged_spec(torch.float16, stride=65, cache=".ca", evict="evict_first"))
    assert _lines(ptx, "ld.global.ca.L2::cache_hint.u16"), "\n".join(_lines(ptx, ".global"))


# -- TMA -------------------------------------------------------------------------------------------

def _tma_spec(cache="", load="", store="", prefetch="", reduce="", shape=(64, 64)):
    x, y = torch.zeros(*shape), torch.zeros(*shape)
    return specialization_from_args(K.tma_copy, {
        "x_desc": tlxc.TensorDescriptor.from_tensor(x, [32, 32]),
        "y_desc": tlxc.TensorDescriptor.from_tensor(y, [32, 32]), "BM": 32, "BN": 32, "CACHE": cache,
        "LOAD_EVICT": load, "STORE_EVICT": store, "PREFETCH_EVICT": prefetch, "REDUCE": reduce})


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tma_copies_take_the_l2_policy(arch):
    ptx = _ptx(K.tma_copy, _tma_spec(".cg", "evict_first", "evict_last", "evict_first"), arch=arch)
    for instruction in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint",
                        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint",
                        "cp.async.bulk.prefetch.tensor.2d.L2.global.tile.L2::cache_hint",
                        "createpolicy.fractional.L2::evict_first.b64", "createpolicy.fractional.L2::evict_last.b64"):
        assert _lines(ptx, instruction), "\n".join(_lines(ptx, "cp."))


def test_tma_reduce_store_takes_the_l2_policy():
    ptx = _ptx(K.tma_copy, _tma_spec(store="evict_first", reduce="add"))
    assert _lines(ptx, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group.L2::cache_hint")


def test_unhinted_tma_is_unchanged():
    cuda = compile_kernel(K.tma_copy, _tma_spec(), stages=("ir", "cuda")).asm["cuda"]
    assert "tlx_tma_load_2d(" in cuda and "tlx_tma_store_2d(" in cuda and "tlx_tma_prefetch_2d(" in cuda
    assert "_hint_" not in cuda


# -- bad values: located errors naming the argument and the valid values ---------------------------

def _axpb_error(**hints) -> str:
    with pytest.raises(tlxc.CompilationError) as info:
        frontend(K.axpb, _axpb_spec(**hints))
    return str(info.value)


@pytest.mark.parametrize("hints,message,where", [
    ({"LOAD_CACHE": ".cs"}, ("'cache_modifier' must be one of '', '.ca', '.cg', '.cv' (a load's cache modifiers), "
                             "got '.cs'"), "cache_modifier=LOAD_CACHE"),
    ({"STORE_CACHE": ".ca"}, ("'cache_modifier' must be one of '', '.wb', '.cg', '.cs', '.wt' (a store's cache "
                              "modifiers), got '.ca'"), "cache_modifier=STORE_CACHE"),
    ({"LOAD_EVICT": "evict_some"}, ("'eviction_policy' must be one of '', 'evict_normal', 'evict_first', "
                                    "'evict_last' (eviction policies), got 'evict_some'"),
     "eviction_policy=LOAD_EVICT"),
    ({"STORE_EVICT": 1}, "'eviction_policy' must be one of", "eviction_policy=STORE_EVICT"),
    ({"VOLATILE": "yes"}, "'volatile' must be True or False", "volatile=VOLATILE"),
    ({"VOLATILE": True, "LOAD_CACHE": ".cg"}, "'volatile=True' cannot be combined with 'cache_modifier'",
     "cache_modifier=LOAD_CACHE"),
    ({"VOLATILE": True, "LOAD_EVICT": "evict_last"}, "'volatile=True' cannot be combined with 'eviction_policy'",
     "eviction_policy=LOAD_EVICT"),
])
def test_bad_load_store_hint_is_a_located_error(hints, message, where):
    text = _axpb_error(**hints)
    assert message in text, text
    assert "kernels_cache_hints.py:" in text and where in text, text


@pytest.mark.parametrize("cache,evict,message,where", [
    (".cv", "", "'cache_modifier' must be one of '', '.ca', '.cg'", "cache_modifier=CACHE"),
    ("", "first", "'eviction_policy' must be one of", "eviction_policy=EVICT"),
])
def test_bad_cp_async_hint_is_a_located_error(cache, evict, message, where):
    with pytest.raises(tlxc.CompilationError) as info:
        frontend(K.staged_copy, _staged_spec(cache=cache, evict=evict))
    text = str(info.value)
    assert message in text and "kernels_cache_hints.py:" in text and where in text, text


@pytest.mark.parametrize("hints,message", [
    ({"cache": ".ca"}, "a TMA load cannot honour cache_modifier='.ca'"),
    ({"cache": ".cv"}, "a TMA load cannot honour cache_modifier='.cv'"),
    ({"cache": ".wb"}, "'cache_modifier' must be one of '', '.ca', '.cg', '.cv'"),
    ({"load": "evict_later"}, "'eviction_policy' must be one of"),
    ({"store": "last"}, "'eviction_policy' must be one of"),
    ({"prefetch": ".cg"}, "'eviction_policy' must be one of"),
])
def test_bad_tma_hint_is_a_located_error(hints, message):
    with pytest.raises(tlxc.CompilationError) as info:
        frontend(K.tma_copy, _tma_spec(**hints))
    text = str(info.value)
    assert message in text and "kernels_cache_hints.py:" in text, text


# -- same results: the interpreter (which ignores hints) and the GPU ----------------------------------

def _poisoned(n, dtype, device):
    return torch.full((n,), 77, dtype=dtype, device=device)


def _random(n, dtype, device):
    if dtype.is_floating_point:
        return torch.randn(n, device=device).to(dtype)
    return torch.randint(-100, 100, (n,), device=device).to(dtype)


def _run_axpb(dtype, stride, hints, device="cpu"):
    x = _random(N * stride, dtype, device)
    y = _poisoned(N + 24, dtype, device)
    launcher = tlxc.interpret(K.axpb) if device == "cpu" else K.axpb
    launcher[(-(-N // BLOCK),)](**_axpb_args(x, y, N, stride, **hints))
    want = (x[::stride] * 2 + 1).double()     # rounded (floats) or wrapped (integers) as the kernel does
    torch.testing.assert_close(y[:N].double(), want, rtol=0, atol=0)
    assert (y[N:] == 77).all(), "a masked-off element was written"


ALL_HINTS = [dict(load, **store) for load, store, _, _ in ACCESS_CASES]


@pytest.mark.parametrize("hints", ALL_HINTS[:2])
def test_interpreter_ignores_the_hints(hints):
    _run_axpb(torch.float32, 1, hints)


def test_interpreter_runs_hinted_cp_async_and_tma():
    m, n, stride = 50, 64, 65
    x = torch.randn(m * stride)
    y = torch.full((64 * 64,), 77.0)
    tlxc.interpret(K.staged_copy)[(2,)](x, y, m, n, stride, BM=32, BN=64, CACHE=".ca", EVICT="evict_first")
    torch.testing.assert_close(y[:m * n].view(m, n), x.view(m, stride)[:, :n], rtol=0, atol=0)
    a, b = torch.randn(50, 40), torch.full((50, 40), 77.0)
    tlxc.interpret(K.tma_copy)[(2, 2)](
        tlxc.TensorDescriptor.from_tensor(a, [32, 32]), tlxc.TensorDescriptor.from_tensor(b, [32, 32]),
        BM=32, BN=32, CACHE=".cg", LOAD_EVICT="evict_first", STORE_EVICT="evict_last", PREFETCH_EVICT="evict_last",
        REDUCE="")
    torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("stride,dtype", [(1, torch.float32), (2, torch.float16), (2, torch.int8)])
@pytest.mark.parametrize("hints", ALL_HINTS, ids=[c[2].split(".v4")[0] for c in ACCESS_CASES])
def test_gpu_hinted_loads_and_stores(hints, stride, dtype):
    _run_axpb(dtype, stride, hints, device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("volatile,store_cache", [(True, ".wt"), (False, ".cs")])
def test_gpu_hinted_scalar_accesses(volatile, store_cache):
    x = torch.randn(37, device="cuda").double()
    y = torch.full((40,), 77.0, device="cuda", dtype=torch.float64)
    K.scalar_copy[(37,)](x, y, **{**NO_HINTS, "VOLATILE": volatile, "STORE_CACHE": store_cache,
                                  "LOAD_EVICT": "" if volatile else "evict_first"})
    torch.testing.assert_close(y[:37], x + 1, rtol=0, atol=0)
    assert (y[37:] == 77).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,stride,cache,evict", [(torch.float32, 64, "", "evict_first"),
                                                      (torch.float32, 64, ".ca", "evict_last"),
                                                      (torch.float32, 64, ".cg", ""),
                                                      (torch.float32, 65, ".ca", "evict_first"),
                                                      (torch.float16, 65, "", "evict_last")])
def test_gpu_hinted_cp_async(dtype, stride, cache, evict):
    """Correct with any hint; an eviction policy (which cp.async does not carry: rules_tlx._cp_async_hints)
    is reported by a ``tlxc.PerformanceWarning`` at the specialization's first launch."""
    import warnings
    m, n = 50, 64
    x = torch.randn(m * stride, device="cuda").to(dtype)
    y = torch.full((64 * 64,), 77, dtype=dtype, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        K.staged_copy[(-(-m // 32),)](x, y, m, n, stride, BM=32, BN=64, CACHE=cache, EVICT=evict)
    dropped = [w for w in caught if issubclass(w.category, tlxc.PerformanceWarning) and "cp.async" in str(w.message)]
    # (fp16 at an odd stride: 2-byte pieces, copied by a hinted synchronous load, which keeps the policy)
    assert len(dropped) == (1 if evict and dtype == torch.float32 else 0), [str(w.message) for w in caught]
    want = x[:m * stride].view(m, stride)[:, :n]
    torch.testing.assert_close(y[:m * n].view(m, n), want, rtol=0, atol=0)
    assert (y[m * n:] == 77).all()


@pytest.mark.gpu
@pytest.mark.parametrize("reduce", ["", "add"])
def test_gpu_hinted_tma(reduce):
    m, n = 50, 40
    x = torch.randn(m, n, device="cuda")
    init = torch.randn(m, n, device="cuda")
    y = init.clone()
    K.tma_copy[(-(-m // 32), -(-n // 32))](
        tlxc.TensorDescriptor.from_tensor(x, [32, 32]), tlxc.TensorDescriptor.from_tensor(y, [32, 32]),
        BM=32, BN=32, CACHE=".cg", LOAD_EVICT="evict_first", STORE_EVICT="evict_last", PREFETCH_EVICT="evict_last",
        REDUCE=reduce)
    torch.testing.assert_close(y, x + init if reduce else x, rtol=1e-6, atol=1e-6)
