"""tlxc kernels as torch custom ops (tlxc/torch_ops.py, examples/custom_op.py).

On the CPU the op's real implementation runs the kernel on the interpreter, so
registration, the fake implementation, ``opcheck`` and a ``torch.compile(fullgraph=True)``
trace (aot_eager backend) are all checked here; the GPU test runs Inductor (when Triton is
installed) and checks the profiler names the kernel."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

import custom_op  # examples/custom_op.py
from torch._subclasses.fake_tensor import FakeTensorMode

import tlxc
from tlxc.torch_ops import register_custom_op


def test_the_op_is_registered_under_its_name():
    assert torch.ops.tlxc_examples.softmax.default is not None
    schema = str(torch.ops.tlxc_examples.softmax.default._schema)
    assert schema == "tlxc_examples::softmax(Tensor x) -> Tensor"


def test_the_fake_gives_the_real_metadata_without_running_the_kernel():
    with FakeTensorMode():
        x = torch.empty(3, 5, 37, dtype=torch.bfloat16)
        y = torch.ops.tlxc_examples.softmax(x)
        assert y.shape == (3, 5, 37) and y.dtype == torch.bfloat16 and y.is_contiguous()
        with pytest.raises(ValueError, match="expects bfloat16"):
            torch.ops.tlxc_examples.softmax(x.float())


def test_eager_call_runs_the_kernel_on_the_interpreter():
    x = torch.randn(2, 3, 45, dtype=torch.bfloat16)
    y = custom_op.softmax(x)
    ref = torch.softmax(x.double(), dim=-1)
    assert ((y.double() - ref).norm() / ref.norm()).item() < 8e-3


def test_opcheck_passes_on_cpu():
    x = torch.randn(4, 29, dtype=torch.bfloat16)
    results = torch.library.opcheck(custom_op.softmax, (x,),
                                    test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    assert set(results.values()) == {"SUCCESS"}, results


def test_compiled_fullgraph_model_calls_the_op():
    torch.manual_seed(0)
    model = custom_op.Attention(16).to(torch.bfloat16)
    x = torch.randn(1, 12, 16, dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        out = compiled(x)
    ref = custom_op.reference(model, x)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 3e-2


def test_backward_through_the_op_matches_torch():
    x = torch.randn(3, 21, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(3, 21, dtype=torch.bfloat16)
    custom_op.softmax(x).backward(grad)
    x_ref = x.detach().double().requires_grad_(True)
    torch.softmax(x_ref, dim=-1).backward(grad.double())
    assert ((x.grad.double() - x_ref.grad).norm() / x_ref.grad.norm()).item() < 3e-2


# -- the helper ----------------------------------------------------------------------------------------

def test_register_custom_op_defaults_to_the_tlxc_namespace_and_no_output_ops_need_no_fake():
    def fill_(out: torch.Tensor, value: float) -> None:
        out.fill_(value)
    op = register_custom_op("test_fill_", fill_, mutates_args=("out",))
    assert op is tlxc.register_custom_op("test_fill_", fill_, mutates_args=("out",))
    t = torch.zeros(3)
    torch.ops.tlxc.test_fill_(t, 2.0)
    assert t.tolist() == [2.0, 2.0, 2.0]
    with FakeTensorMode():
        assert torch.ops.tlxc.test_fill_(torch.empty(3), 1.0) is None


def test_register_custom_op_needs_a_fake_for_tensor_outputs():
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2
    with pytest.raises(TypeError, match="needs fake="):
        register_custom_op("tlxc_tests::double", double)


def test_register_custom_op_as_a_decorator_and_re_registration_swaps_the_implementation():
    @register_custom_op("tlxc_tests::plus", fake=lambda x: torch.empty_like(x))
    def plus(x: torch.Tensor) -> torch.Tensor:
        return x + 1
    assert torch.ops.tlxc_tests.plus(torch.zeros(2)).tolist() == [1.0, 1.0]

    @register_custom_op("tlxc_tests::plus", fake=lambda x: torch.empty_like(x))
    def plus_again(x: torch.Tensor) -> torch.Tensor:
        return x + 2
    assert plus_again is plus
    assert torch.ops.tlxc_tests.plus(torch.zeros(2)).tolist() == [2.0, 2.0]

    def other_schema(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y
    with pytest.raises(RuntimeError, match="cannot change it"):
        register_custom_op("tlxc_tests::plus", other_schema, fake=lambda x, y: torch.empty_like(x))


@pytest.mark.gpu
def test_gpu_compiled_model_calls_the_tlxc_kernel():
    torch.manual_seed(0)
    model = custom_op.Attention(128).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 512, 128, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=custom_op.compile_backend(on_gpu=True))
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = compiled(x)
        torch.cuda.synchronize()
    ref = custom_op.reference(model, x)
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 3e-2
    names = {event.name for event in prof.events()}
    assert any(name.startswith("softmax_kernel_BLOCK512") for name in names), sorted(names)[:20]
