"""TMA descriptors on the host, without a GPU: legality rules and their
messages, the swizzle rule, the IR type, the arguments of
``cuTensorMapEncodeTiled`` (the driver call is replaced), the encode cache,
and how a descriptor argument specializes, keys and launches."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc import descriptors as tma
from tlxc.descriptors import TensorDescriptor, choose_swizzle
from tlxc.errors import CudaError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir import types as T
from tlxc.ir.types import TensorDescType
from tlxc.runtime import launch as L


@tlxc.kernel
def desc_kernel(a_desc, out_ptr, n, BLOCK: tl.constexpr = 16):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, n)


class FakeCudaTensor:
    """A CPU tensor that claims to live on cuda:0 (enough for encode())."""

    is_cuda = True

    def __init__(self, tensor: torch.Tensor, address: int = 0x7F0000000000):
        self.tensor = tensor
        self.address = address
        self.dtype = tensor.dtype
        self.shape = tensor.shape

    def data_ptr(self) -> int:
        return self.address

    def stride(self):
        return self.tensor.stride()

    def get_device(self) -> int:
        return 0


class FakeMap:
    def __init__(self):
        self.opaque = list(range(16))


@pytest.fixture
def fake_driver(monkeypatch):
    """Replace the cuda.bindings calls; record each encode's arguments."""
    from cuda.bindings import driver as cu
    calls = []

    def encode(*args):
        calls.append(args)
        return cu.CUresult.CUDA_SUCCESS, FakeMap()

    monkeypatch.setattr(cu, "cuTensorMapEncodeTiled", encode)
    monkeypatch.setattr(cu, "cuInit", lambda flags: (cu.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(tma, "_DRIVER_READY", [])
    monkeypatch.setattr(tma, "_ENCODED", {})          # no map encoded by an earlier test's fake
    return calls


def bf16(*shape):
    return torch.zeros(*shape, dtype=torch.bfloat16)


# -- legality ------------------------------------------------------------------------------
def test_from_tensor_takes_shape_and_element_strides():
    desc = TensorDescriptor.from_tensor(bf16(1000, 776), [128, 64])
    assert desc.shape == (1000, 776) and desc.strides == (776, 1) and desc.block_shape == (128, 64)
    assert desc.dtype == T.bf16 and desc.swizzle == 128 and desc.padding == "zero"
    assert desc.base.shape == (1000, 776)


def test_misaligned_base_is_rejected():
    t = bf16(64, 64).view(-1)[1:].view(63, 65)[:, :64]   # starts one element (2 bytes) in
    with pytest.raises(tlxc.LaunchError, match=r"'tensor' base address .* is not 16-byte aligned"):
        TensorDescriptor(t, [63, 64], [65, 1], [64, 64])


def test_transposed_tensor_fails_the_unit_stride_rule():
    with pytest.raises(tlxc.LaunchError, match=r"'strides' must end in 1 \(TMA requires a unit stride"):
        TensorDescriptor.from_tensor(bf16(64, 128).t(), [64, 64])


def test_non_contiguous_tensor_is_fine_when_strides_obey_the_rules():
    t = bf16(64, 256)[:, :128]                  # rows of 256 elements, 128 used
    desc = TensorDescriptor.from_tensor(t, [64, 64])
    assert desc.strides == (256, 1)


def test_row_stride_that_is_not_a_16_byte_multiple_is_rejected():
    message = ("TensorDescriptor: 'strides' must give a 16-byte multiple for every dimension but the last: "
               "stride 777 of dim 0 is 1554 bytes (TMA requires 16-byte aligned row strides)")
    with pytest.raises(tlxc.LaunchError) as info:
        TensorDescriptor.from_tensor(bf16(1000, 777), [64, 64])
    assert message in str(info.value)


def test_negative_or_zero_strides_are_rejected():
    with pytest.raises(tlxc.LaunchError, match="'strides' must be positive: stride 0 of dim 0"):
        TensorDescriptor(bf16(1, 64), [8, 64], [0, 1], [8, 64])


def test_box_longer_than_256_and_no_multiple_of_it_is_rejected():
    # (512 rows are two 256-row copies: tests/test_tma_wide_boxes.py)
    with pytest.raises(tlxc.LaunchError, match="'block_shape' dimension 0 is 300; a TMA box has 1 to 256 elements "
                                               "per dimension, or a multiple of 256"):
        TensorDescriptor.from_tensor(bf16(1024, 64), [300, 64])


def test_inner_box_under_16_bytes_is_rejected_when_the_box_is_used():
    # the box may be a placeholder until the launch (an autotune pre_hook sets it): checked on use
    narrow = TensorDescriptor.from_tensor(bf16(64, 64), [64, 4])
    with pytest.raises(tlxc.LaunchError, match=r"'block_shape' inner dimension is 4 x bf16 = 8 bytes; TMA "
                                               r"requires at least 16 bytes"):
        narrow.ir_type()
    with pytest.raises(tlxc.LaunchError, match="= 24 bytes"):
        TensorDescriptor.from_tensor(bf16(64, 64), [64, 12]).ir_type()


def test_unsupported_dtype_is_rejected():
    with pytest.raises(tlxc.LaunchError, match="'tensor' has dtype torch.bool, which TMA cannot copy"):
        TensorDescriptor.from_tensor(torch.zeros(64, 64, dtype=torch.bool), [64, 64])
    with pytest.raises(tlxc.LaunchError, match="'tensor' has dtype torch.complex64"):
        TensorDescriptor.from_tensor(torch.zeros(64, 64, dtype=torch.complex64), [64, 8])
    with pytest.raises(tlxc.LaunchError, match="'tensor' must be a torch tensor"):
        TensorDescriptor([1, 2, 3], [3], [1], [3])


def test_rank_6_is_rejected():
    with pytest.raises(tlxc.LaunchError, match="'shape' must have 1 to 5 dimensions .* got 6"):
        TensorDescriptor.from_tensor(bf16(2, 2, 2, 2, 2, 64), [1, 1, 1, 1, 1, 64])


def test_mismatched_lengths_are_rejected():
    with pytest.raises(tlxc.LaunchError, match=r"'strides' must have one entry per dimension of 'shape' \(2\)"):
        TensorDescriptor(bf16(64, 64), [64, 64], [1], [64, 64])
    with pytest.raises(tlxc.LaunchError, match=r"'block_shape' must have one entry per dimension"):
        TensorDescriptor(bf16(64, 64), [64, 64], [64, 1], [64])


def test_padding():
    assert TensorDescriptor.from_tensor(bf16(64, 64), [64, 64], padding="nan").padding == "nan"
    with pytest.raises(tlxc.LaunchError, match="'padding' 'nan' needs a floating-point tensor"):
        TensorDescriptor.from_tensor(torch.zeros(64, 64, dtype=torch.int32), [64, 16], padding="nan")
    with pytest.raises(tlxc.LaunchError, match="'padding' must be 'zero' or 'nan'"):
        TensorDescriptor.from_tensor(bf16(64, 64), [64, 64], padding="one")


@pytest.mark.parametrize("dtype, element", [
    (torch.float16, T.f16), (torch.bfloat16, T.bf16), (torch.float32, T.f32), (torch.float64, T.f64),
    (torch.float8_e4m3fn, T.f8e4m3), (torch.float8_e5m2, T.f8e5m2), (torch.int8, T.i8), (torch.uint8, T.u8),
    (torch.int16, T.i16), (torch.int32, T.i32), (torch.int64, T.i64)])
def test_supported_dtypes(dtype, element):
    box = 128 // element.bytes
    desc = TensorDescriptor.from_tensor(torch.zeros(8, box, dtype=dtype), [8, box])
    assert desc.dtype == element and desc.swizzle == 128


# -- swizzle and the IR type ---------------------------------------------------------------
@pytest.mark.parametrize("inner_bytes, swizzle", [
    (16, 0), (32, 32), (48, 0), (64, 64), (96, 0), (128, 128), (256, 0), (512, 0)])
def test_swizzle_rule(inner_bytes, swizzle):
    assert choose_swizzle(inner_bytes) == swizzle


@pytest.mark.parametrize("dtype, inner, swizzle", [
    (torch.bfloat16, 64, 128), (torch.bfloat16, 32, 64), (torch.bfloat16, 16, 32), (torch.bfloat16, 8, 0),
    (torch.bfloat16, 128, 128), (torch.float32, 32, 128), (torch.float8_e4m3fn, 128, 128),
    (torch.float8_e4m3fn, 256, 128), (torch.bfloat16, 200, 0)])     # wider: 128-byte sub-boxes (tests/test_wide_boxes.py)
def test_descriptor_swizzle_from_inner_box(dtype, inner, swizzle):
    desc = TensorDescriptor.from_tensor(torch.zeros(64, 256, dtype=dtype), [64, inner])
    assert desc.swizzle == swizzle


def test_ir_type():
    desc = TensorDescriptor.from_tensor(bf16(256, 256), [128, 64])
    assert desc.ir_type() == TensorDescType(T.bf16, (128, 64), 128)
    assert str(desc.ir_type()) == "tensordesc<128x64xbf16, swizzle=128>"


# -- encoding ------------------------------------------------------------------------------
def test_encode_arguments_are_in_tma_order(fake_driver):
    from cuda.bindings import driver as cu
    base = FakeCudaTensor(bf16(4, 1000, 776), address=0x7F0000001000)
    desc = TensorDescriptor.from_tensor(base, [1, 128, 64])
    blob = desc.encode()
    assert blob == b"".join(i.to_bytes(8, "little") for i in range(16))
    (args,) = fake_driver
    (dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob) = args
    assert dtype == cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert rank == 3 and address == 0x7F0000001000
    assert [int(d) for d in dims] == [776, 1000, 4]                 # innermost first
    assert [int(s) for s in strides] == [776 * 2, 1000 * 776 * 2]    # bytes, innermost excluded
    assert [int(b) for b in box] == [64, 128, 1]
    assert [int(e) for e in element_strides] == [1, 1, 1]
    assert interleave == cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert swizzle == cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert l2 == cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B
    assert oob == cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE


def test_encode_fp8_and_nan_padding(fake_driver):
    from cuda.bindings import driver as cu
    base = FakeCudaTensor(torch.zeros(256, 256, dtype=torch.float8_e4m3fn))
    TensorDescriptor.from_tensor(base, [64, 64], padding="nan").encode()
    args = fake_driver[0]
    assert args[0] == cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8
    assert args[8] == cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B
    assert args[10] == cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


def test_encode_is_cached_per_address(fake_driver):
    base = FakeCudaTensor(bf16(128, 128))
    desc = TensorDescriptor.from_tensor(base, [64, 64])
    first = desc.encode()
    assert desc.encode() is first and len(fake_driver) == 1
    base.address += 1 << 20                                          # storage moved (e.g. .set_())
    desc.encode()
    assert len(fake_driver) == 2
    # a new descriptor of the same tensor and box (a wrapper building descriptors on every
    # call) reuses the map: nothing is encoded again
    again = TensorDescriptor.from_tensor(base, [64, 64])
    assert again.encode() is desc.encode() and len(fake_driver) == 2
    TensorDescriptor.from_tensor(base, [32, 64]).encode()             # another box: its own map
    assert len(fake_driver) == 3


def test_encode_failure_names_the_call_and_arguments(monkeypatch, fake_driver):
    from cuda.bindings import driver as cu
    monkeypatch.setattr(cu, "cuTensorMapEncodeTiled",
                        lambda *args: (cu.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    desc = TensorDescriptor.from_tensor(FakeCudaTensor(bf16(128, 128)), [64, 64])
    with pytest.raises(CudaError, match=r"cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE "
                                        r"\(tensorDataType=CU_TENSOR_MAP_DATA_TYPE_BFLOAT16.*"
                                        r"globalDim=\[128, 128\], globalStrides=\[256\], boxDim=\[64, 64\]"):
        desc.encode()


def test_encode_of_a_cpu_tensor_says_interpreter_only():
    desc = TensorDescriptor.from_tensor(bf16(64, 64), [64, 64])
    with pytest.raises(tlxc.LaunchError, match="'tensor' is not on a CUDA device"):
        desc.encode()


# -- launch integration --------------------------------------------------------------------
def test_specialization_of_a_descriptor_argument():
    desc = TensorDescriptor.from_tensor(bf16(64, 64), [64, 64])
    out = torch.zeros(4, dtype=torch.int32)
    spec = specialization_from_args(desc_kernel, {"a_desc": desc, "out_ptr": out, "n": 5, "BLOCK": 16})
    assert spec.params["a_desc"] == ("runtime", TensorDescType(T.bf16, (64, 64), 128))
    assert "a_desc" not in spec.divisibility
    other = TensorDescriptor.from_tensor(bf16(64, 64), [32, 64])
    spec2 = specialization_from_args(desc_kernel, {"a_desc": other, "out_ptr": out, "n": 5, "BLOCK": 16})
    assert spec.key() != spec2.key()


def test_key_parts_of_a_descriptor():
    desc = TensorDescriptor.from_tensor(bf16(64, 64), [64, 64])
    out = torch.zeros(4, dtype=torch.int32)
    parts = L.key_parts(desc_kernel, (desc, out, 5, 16))
    assert parts[:2] == [desc._type_key, -1]                           # type (as a small int), device (CPU: -1)
    # one key per IR type: same element, box and swizzle -> same key; another box -> another
    assert TensorDescriptor.from_tensor(bf16(128, 64), [64, 64])._type_key == desc._type_key
    assert TensorDescriptor.from_tensor(bf16(64, 64), [32, 64])._type_key != desc._type_key


def test_fast_path_passes_the_cached_map(fake_driver):
    kfn = desc_kernel
    desc = TensorDescriptor.from_tensor(FakeCudaTensor(bf16(64, 64)), [64, 64])
    out = torch.zeros(4, dtype=torch.int32)
    bound = (desc, out, 5, 16)
    calls = []
    kfn._interpret = False
    kfn._stream = lambda device: 7
    key = L.launch_key(kfn, bound)
    plan = L.LaunchPlan(lambda *a: calls.append(a), [0, 1, 2], [False, True, False], (128, 1, 1), 0, 0,
                        "compiled")
    kfn.cache[key] = plan
    kfn.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    kfn._fast = L.build_fast_path(kfn, bound)
    try:
        assert kfn[(2,)](desc, out, 5) == "compiled"
        assert kfn[(2,)](desc, out, 5) == "compiled"
        assert len(calls) == 2 and len(fake_driver) == 1               # encoded once
        assert calls[-1][4] == (desc.encode(), out.data_ptr(), 5)
    finally:
        kfn.cache.clear()
        kfn.fast_cache.clear()
        kfn._fast = kfn._first_launch
        kfn._interpret = None


def test_param_kind_and_generated_signature():
    from tlxc.codegen_nvptx.cuda import TENSORMAP_STRUCT, param_kind
    from tlxc.compiler import compile_kernel
    assert param_kind(TensorDescType(T.bf16, (64, 64), 128)) == "bytes128"
    desc = TensorDescriptor.from_tensor(bf16(64, 64), [64, 64])
    out = torch.zeros(4, dtype=torch.int32)
    spec = specialization_from_args(desc_kernel, {"a_desc": desc, "out_ptr": out, "n": 5, "BLOCK": 16})
    compiled = compile_kernel(desc_kernel, spec, arch="sm_90a")
    source = compiled.asm["cuda"]
    assert TENSORMAP_STRUCT in source and "__align__" not in source
    assert "(const __grid_constant__ tlx_tensormap a_desc, int* out_ptr, int n)" in source
    assert compiled.metadata["params"] == ["bytes128", "u64", "i32"]


def test_no_struct_without_descriptor_params():
    from tlxc.codegen_nvptx.cuda import TENSORMAP_STRUCT
    from tlxc.compiler import compile_kernel
    out = torch.zeros(4, dtype=torch.int32)
    spec = specialization_from_args(desc_kernel, {"a_desc": out, "out_ptr": out, "n": 5, "BLOCK": 16})
    assert TENSORMAP_STRUCT not in compile_kernel(desc_kernel, spec, arch="sm_90a").asm["cuda"]


def test_interpreter_launch_with_a_cpu_descriptor():
    from tlxc.interpreter.launch import prepare_launch, should_interpret
    desc = TensorDescriptor.from_tensor(bf16(64, 64), [64, 64])
    out = torch.zeros(4, dtype=torch.int32)
    assert should_interpret((desc, 5), {})
    _runner, _grid, _memory, values = prepare_launch(desc_kernel, (4,), (desc, out, 5))
    assert values[0] is desc
    desc_kernel[(4,)](desc, out, 5)                                    # CPU tensors: the interpreter
    assert out.tolist() == [5, 5, 5, 5]


def test_descriptor_geometry_is_reassignable_and_rekeys():
    """Triton code assigns ``desc.block_shape`` in a pre_hook: the IR type, launch key and
    encoded map follow the new box (tests/test_host_api.py covers the launches)."""
    d = tlxc.TensorDescriptor.from_tensor(torch.zeros(64, 64), [16, 16])
    key = d._type_key
    d.block_shape = [8, 16]
    assert d.block_shape == (8, 16) and d._type_key != key
    assert d.ir_type() == TensorDescType(T.f32, (8, 16), 64)
    with pytest.raises(AttributeError, match="follows from the tensor"):
        d.swizzle = 0
