"""The host path of TLX's GEMM wrappers (issue 17): three ``TensorDescriptor``s with a
placeholder box built on every call, an autotuner with a cached choice whose config
``pre_hook`` assigns the boxes, a launch with keyword constexprs.  A descriptor of a
geometry seen before skips the rules (``_KNOWN``) but still reads its own tensor; the
autotuner hands its pre_hook the launch's arguments, keywords and config values on every
launch.  The cost is measured by ``bench/tlx_wrapper_host_probe.py``."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from launch_state import forget_launches

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc import descriptors as tma
from tlxc.errors import LaunchError

TD = tlxc.TensorDescriptor


def test_a_known_geometry_is_not_rechecked_but_reads_its_own_tensor(monkeypatch):
    first = torch.zeros(96, 64, dtype=torch.float16)
    TD(first, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])       # the rules run once: remembered
    described = []
    plain = tma.TensorDescriptor._describe
    monkeypatch.setattr(tma.TensorDescriptor, "_describe", lambda self: (described.append(1), plain(self)))
    other = torch.zeros(96, 64, dtype=torch.float16)                     # another tensor, same geometry
    d = TD(other, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    assert described == [] and d.base is other and d.dtype.name == "f16" and d.device_index == -1
    assert "swizzle" not in d.__dict__                                   # still a placeholder box
    d.block_shape = [32, 64]                                             # a new box: checked (describe) ...
    assert described == [1] and d.swizzle == 128
    e = TD(other, shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    e.block_shape = [32, 64]                                             # ... once
    assert described == [1] and e.ir_type() == d.ir_type()
    # the encoded map is keyed on the geometry's number: one per geometry, another for another box
    assert e._gid == d._gid
    e.__dict__["_last_address"] = 12345                                  # (as after a launch's encode)
    e.block_shape = (32, 64)                                             # the box it has: the map stays
    assert e._last_address == 12345
    e.block_shape = [16, 64]
    assert e._last_address is None and e._gid != d._gid and e.swizzle == 128
    # what the geometry does not hold is still read from each tensor: the storage and the dtype
    described.clear()
    with pytest.raises(LaunchError, match="storage holds"):
        TD(torch.zeros(95, 64, dtype=torch.float16), shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    f = TD(torch.zeros(96, 64, dtype=torch.bfloat16), shape=[96, 64], strides=[64, 1], block_shape=[1, 1])
    assert f.dtype.name == "bf16" and described == [1, 1]


def _boxes(nargs):
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    SEEN.append(sorted(k for k in nargs if not k.endswith("_desc")))


SEEN: list = []


@tlxc.autotune(configs=[tlxc.Config({"BM": 32, "BN": 32, "BK": 32}, num_warps=4, pre_hook=_boxes)], key=["M"])
@tlxc.jit
def double_tiles(a_desc, c_desc, M, SCALE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    x = a_desc.load([pid * BM, 0])
    c_desc.store([pid * BM, 0], (x.to(tl.float32) * SCALE).to(tlx.dtype_of(c_desc)))


def test_the_wrapper_pattern_relaunches_with_fresh_placeholders(monkeypatch):
    monkeypatch.setenv("TLXC_INTERPRET", "1")
    SEEN.clear()
    for call in range(3):
        M = 64 + 32 * (call % 2)            # two tuning keys in turn
        a = torch.randn(M, 32, dtype=torch.float16)
        c = torch.full((M, 32), float("nan"), dtype=torch.float16)
        da = TD(a, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        dc = TD(c, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        double_tiles[lambda meta, M=M: (tlxc.cdiv(M, meta["BM"]),)](da, dc, M, SCALE=2.0)
        torch.testing.assert_close(c.float(), a.float() * 2.0, rtol=1e-3, atol=1e-3)
        assert da.block_shape == (32, 32) and dc.swizzle == 64
    # every launch: the positional arguments, the keyword and the config's values and options
    assert SEEN == [["BK", "BM", "BN", "M", "SCALE", "num_ctas", "num_stages", "num_warps"]] * 3


# -- what a wrapper call redoes (issue 17: the host path of TLX's GEMM wrappers) ---------------------

def test_a_descriptor_built_again_copies_what_the_rules_found_and_still_refuses():
    t = torch.zeros(80, 64, dtype=torch.float16)
    slow = TD(t, shape=[80, 64], strides=[64, 1], block_shape=[16, 32])      # the rules run (or ran before)
    fast = TD(t, shape=(80, 64), strides=torch.Size([64, 1]), block_shape=[16, 32])
    assert {k: v for k, v in vars(fast).items() if k != "_last_blob"} == {
        k: v for k, v in vars(slow).items() if k != "_last_blob"}
    assert fast.shape == (80, 64) and type(fast.shape[0]) is int and fast.swizzle == 64
    # a key seen before does not let anything through that the rules refuse
    with pytest.raises(LaunchError, match="expected a sequence of ints"):
        TD(t, shape=[80.0, 64], strides=[64, 1], block_shape=[16, 32])      # equal to a known key, still a float
    with pytest.raises(LaunchError, match="storage holds"):
        TD(t[1:], shape=[80, 64], strides=[64, 1], block_shape=[16, 32])    # same geometry, less storage behind
    with pytest.raises(LaunchError, match="16-byte aligned"):
        TD(t.view(-1)[1:], shape=[79, 64], strides=[64, 1], block_shape=[16, 32])
    with pytest.raises(LaunchError, match="must end in 1"):
        TD(t, shape=[80, 64], strides=[64, 2], block_shape=[16, 32])
    other = TD(t.view(torch.bfloat16), shape=[80, 64], strides=[64, 1], block_shape=[16, 32])
    assert other.dtype.name == "bf16"                                        # the dtype is in the key


class _Cuda(torch.Tensor):
    """A CPU tensor that says it is on GPU 0 (the fake driver below launches nothing)."""

    is_cuda = True
    __torch_function__ = torch._C._disabled_torch_function_impl

    def get_device(self):
        return 0


def _set_boxes(nargs):
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["c_desc"].block_shape = [nargs["BM"], nargs["BK"]]


@tlxc.autotune(configs=[tlxc.Config({"BM": 64, "BK": 64}, num_warps=4, pre_hook=_set_boxes)], key=["M"])
@tlxc.jit
def copy_rows(a_desc, c_desc, M, NUM_SMS: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < NUM_SMS:
        c_desc.store([pid * BM, 0], a_desc.load([pid * BM, 0]))


@pytest.fixture(params=["python", "c"])
def fake_gpu(monkeypatch, request):
    """The driver replaced (as in bench/launch_host_probe.py): compiles for sm_90a with NVRTC,
    launches nothing; ``encode_tiled`` counts its calls and returns bytes naming the address."""
    import types

    from tlxc.runtime import driver

    pytest.importorskip("cuda.bindings")

    class Function(driver.CudaFunction):
        def attribute(self, attribute):
            return 48 * 1024 if attribute == driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES else 0

        def set_attribute(self, attribute, value):
            pass

    class Module(driver.CudaModule):
        def function(self, name, device_index=None):
            return Function(self, name, 0xF00D, 0)

    if request.param == "c":        # the C launcher calls a C function: the module's fake one, which counts
        import ctypes

        from tlxc.runtime import c_launcher
        module = c_launcher.module() if c_launcher.compiler() else None
        if module is None:
            pytest.skip("no C compiler or Python headers: the C launcher cannot be built")
        module.set_fake_result(0)
        start = module.fake_state()[0]
        launch = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 4)(module.fake_launch_address())
        count = lambda: module.fake_state()[0] - start       # noqa: E731
    else:
        calls = []
        launch = lambda *args: calls.append(1) or 0          # noqa: E731
        count = calls.__len__
    monkeypatch.setattr(driver, "_driver_lib", types.SimpleNamespace(cuLaunchKernelEx=launch, cuLaunchKernel=None))
    monkeypatch.setattr(driver.CudaModule, "load", classmethod(lambda cls, cubin, device=None: Module(cubin)))
    monkeypatch.setattr(driver, "device_properties",
                        lambda device: types.SimpleNamespace(max_shared_memory_per_block_optin=227 * 1024))
    monkeypatch.setattr(driver, "stream_getter", lambda: (lambda device: 0))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(tma, "_ENCODED", {})
    encodes = []
    monkeypatch.setattr(tma, "encode_tiled", lambda dtype, address, *rest: encodes.append(address) or
                        address.to_bytes(8, "little") * 16)
    # the launch's generated Python path, or the C launcher (which calls encode() through Python)
    monkeypatch.setenv("TLXC_C_LAUNCHER", "0" if request.param == "python" else "1")
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    kfn = copy_rows.kernel
    yield types.SimpleNamespace(encodes=encodes, launches=count, path=request.param)
    forget_launches(kfn)
    copy_rows._single.clear()


# What a wrapper call may run once its geometry, config and maps are known: its own frames,
# the descriptors' construction and box assignment, the autotuner's dispatch, the launch path.
_REDONE = {"_describe", "_check", "_fix_box", "_check_storage", "_remember", "_remember_built", "encode",
           "encode_tiled", "tma_arguments", "_single_entry", "_first_launch_of_key", "_launch_key",
           "tuning_key", "_refuse_conflicts", "launch", "all_kwargs", "named_arguments", "_element_type_checked"}


def test_a_wrapper_call_redoes_no_check_encode_or_dispatch_it_did_before(fake_gpu):
    import sys

    a = torch.zeros(256, 64, dtype=torch.float16).as_subclass(_Cuda)
    outputs = [torch.zeros(256, 64, dtype=torch.float16).as_subclass(_Cuda) for _ in range(2)]

    def wrapper(c):
        """TLX's GEMM wrappers: fresh placeholder descriptors, a config pre_hook sets the boxes."""
        da = TD(a, shape=[256, 64], strides=[64, 1], block_shape=[1, 1])
        dc = TD(c, shape=[256, 64], strides=[64, 1], block_shape=[1, 1])
        copy_rows[lambda meta: (tlxc.cdiv(256, meta["BM"]),)](da, dc, 256, NUM_SMS=4)
        return da, dc

    wrapper(outputs[0])                                  # compiles; encodes the two maps
    assert len(fake_gpu.encodes) == 2 and fake_gpu.launches() == 1
    wrapper(outputs[0])                                  # the generic path makes the specialized one
    frames = []
    sys.setprofile(lambda frame, event, arg: frames.append(frame.f_code.co_name) if event == "call" else None)
    try:
        for _ in range(3):
            _, dc = wrapper(outputs[0])
    finally:
        sys.setprofile(None)
    assert fake_gpu.launches() == 5
    if fake_gpu.path == "c":
        from tlxc.runtime import c_launcher
        assert type(copy_rows.kernel._fast) is c_launcher.module().CLaunch
    assert sorted(set(frames) & _REDONE) == [], "per-call work that should have been cached"
    assert fake_gpu.encodes == [a.data_ptr(), outputs[0].data_ptr()]       # one map per tensor and box
    assert dc._last_address == outputs[0].data_ptr()                       # the map of this call's tensor
    assert dc._last_blob == outputs[0].data_ptr().to_bytes(8, "little") * 16
    # another output tensor: its map is encoded (once), the input's is not
    _, dc = wrapper(outputs[1])
    _, dc = wrapper(outputs[1])
    assert fake_gpu.encodes == [a.data_ptr(), outputs[0].data_ptr(), outputs[1].data_ptr()]
    assert dc._last_blob == outputs[1].data_ptr().to_bytes(8, "little") * 16
    # the box still decides: a descriptor with the placeholder box cannot launch
    bad = TD(a, shape=[256, 64], strides=[64, 1], block_shape=[1, 1])
    with pytest.raises(LaunchError, match="placeholder box"):
        copy_rows.kernel[(1,)](bad, bad, 256, NUM_SMS=4, BM=64, BK=64)


@pytest.mark.gpu
def test_gpu_the_wrapper_pattern_packs_each_calls_own_maps():
    """On a GPU: fresh placeholder descriptors per call, whose maps come from the cache of maps a
    launch encoded (``_reuse_map``) -- each launch must still read and write this call's tensors:
    outputs poisoned, two output buffers and two sizes in turn, inputs fresh each call."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    outputs = {M: [torch.empty(M, 32, device="cuda", dtype=torch.float16) for _ in range(2)] for M in (64, 96)}
    for call in range(8):
        M = (64, 96)[call % 2]
        a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
        c = outputs[M][(call // 2) % 2].fill_(float("nan"))
        da = TD(a, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        dc = TD(c, shape=[M, 32], strides=[32, 1], block_shape=[1, 1])
        double_tiles[lambda meta, M=M: (tlxc.cdiv(M, meta["BM"]),)](da, dc, M, SCALE=2.0)
        torch.testing.assert_close(c.float(), a.float() * 2.0, rtol=1e-3, atol=1e-3)
        assert dc._last_address == c.data_ptr()
