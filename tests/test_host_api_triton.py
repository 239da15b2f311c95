"""Triton's host API around a kernel (issue 18 items 8 and 9): ``driver.active.utils.
get_device_properties`` on a CPU-only machine, ``kernel.warmup(...)`` and the compiled-kernel
handle (``n_regs``, ``n_spills``, ``metadata.shared``, ``asm``, ``_init_handles()``,
``handle[grid](...)``), ``kernel.run(..., warmup=)``, ``tlxc.compat`` as ``triton``, and
programmatic dependent launch (``tl.extra.cuda.gdc_*`` with ``launch_pdl=True``)."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.compat as triton
import tlxc.language as tl
from tlxc.compat import language as compat_tl
from tlxc.errors import CompilationError, LaunchError
from tlxc.runtime import launch as L
from tlxc.runtime.driver_api import INTERPRETER_DEVICE_PROPERTIES

TRITON_KEYS = ("multiprocessor_count", "max_shared_mem", "max_num_regs", "warpSize", "sm_clock_rate",
               "mem_clock_rate", "mem_bus_width")


@tlxc.jit
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    """Persistent rows (tutorial 02's shape of kernel): program p takes rows p, p + P, ..."""
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@tlxc.jit
def pdl_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if USE_GDC:
        tl.extra.cuda.gdc_wait()            # the previous kernel's writes of x are visible after this
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, x + y, mask=mask)


def _softmax_inputs(rows=37, cols=100, device="cpu"):
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(rows, cols, generator=gen).to(device)
    return x, torch.full_like(x, float("nan"))


# -- device properties -----------------------------------------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only description")
def test_device_properties_without_a_gpu_describe_the_default_target():
    active = tlxc.runtime.driver.active
    props = active.utils.get_device_properties(torch.device("cpu").index)     # None, as tutorial 02 passes
    assert all(isinstance(props[k], int) and props[k] > 0 for k in TRITON_KEYS)
    assert props == INTERPRETER_DEVICE_PROPERTIES and props["compute_capability"] == (9, 0)
    assert active.utils.get_device_properties(active.get_current_device()) == props
    props["warpSize"] = 0                                    # a copy: the next caller is unaffected
    assert active.utils.get_device_properties(0)["warpSize"] == 32


# -- warmup and the compiled-kernel handle ----------------------------------------------------

def test_warmup_compiles_without_launching_and_the_handle_launches():
    x, y = _softmax_inputs()
    handle = row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, num_warps=8, grid=(1,))
    assert torch.isnan(y).all()                              # compiled, not launched
    handle._init_handles()
    assert handle.n_regs > 0 and handle.n_spills >= 0 and handle.metadata.num_warps == 8
    assert handle.metadata.shared == handle.compiled.metadata["shared_bytes"]
    assert handle.metadata.num_stages == 3 and handle.metadata.name == handle.name
    assert {"cuda", "cubin"} <= set(handle.asm)         # (from the disk cache: only these two)
    handle[(5, 1, 1)](y, x, x.stride(0), y.stride(0), 37, 100, 128)        # constexprs passed positionally
    ref = torch.softmax(x.double(), dim=1)
    assert ((y.double() - ref).abs() <= 1e-6).all()


def test_warmup_reports_the_spills_as_triton_counts_them():
    x, y = _softmax_inputs()
    handle = row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, grid=(1,))
    assert handle.n_spills == handle.compiled.metadata["spills_bytes"] // 4
    with pytest.raises(AttributeError, match="has no field 'bogus'"):
        _ = handle.metadata.bogus


def test_handle_refuses_another_constexpr_value():
    x, y = _softmax_inputs()
    handle = row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, grid=(1,))
    with pytest.raises(LaunchError, match="compiled with BLOCK=128 and is launched with BLOCK=256"):
        handle[(2,)](y, x, x.stride(0), y.stride(0), 37, 100, 256)
    assert torch.isnan(y).all()


def test_run_launches_or_warms_up():
    x, y = _softmax_inputs(rows=5, cols=20)
    handle = row_softmax.run(y, x, x.stride(0), y.stride(0), 5, 20, BLOCK=32, grid=(1,), warmup=True)
    assert torch.isnan(y).all() and handle.n_regs > 0
    row_softmax.run(y, x, x.stride(0), y.stride(0), 5, 20, BLOCK=32, grid=(2,))
    assert ((y.double() - torch.softmax(x.double(), dim=1)).abs() <= 1e-6).all()


def test_warmup_checks_its_launch_options_and_grid():
    x, y = _softmax_inputs()
    with pytest.raises(LaunchError, match="num_warps must be a power of two"):
        row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, num_warps=3, grid=(1,))
    with pytest.raises(LaunchError, match="grid"):
        row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, grid=(1.5,))


# -- tlxc.compat -----------------------------------------------------------------------------

def test_compat_is_tlxc_under_triton_names():
    assert triton.jit is tlxc.jit and triton.autotune is tlxc.autotune and triton.Config is tlxc.Config
    assert triton.heuristics is tlxc.heuristics and triton.cdiv(10, 4) == 3 and triton.next_power_of_2(33) == 64
    assert compat_tl is tl and triton.language is tl and triton.testing.do_bench is tlxc.testing.do_bench
    assert triton.runtime.driver.active is tlxc.runtime.driver.active
    assert triton.set_allocator is tlxc.set_allocator and triton.JITFunction is tlxc.KernelFunction
    assert triton.tools.tensor_descriptor.TensorDescriptor is tlxc.TensorDescriptor
    assert triton.language.extra.cuda.libdevice.tanh is tl.extra.libdevice.tanh


def test_compat_reports_the_triton_version_it_follows():
    """Triton code gates kernels on ``triton.__version__`` (vLLM's prefix_prefill defines them only
    under ``>= "2.1.0"``): through tlxc.compat it is the Triton release tlxc follows, while
    ``tlxc.__version__`` stays tlxc's own."""
    assert triton.__version__ == "3.6.0" and triton.__version__ >= "2.1.0"
    assert tlxc.__version__ != triton.__version__


def test_compat_says_what_it_lacks():
    with pytest.raises(AttributeError, match="tlxc.compat has no 'profiler'"):
        _ = triton.profiler


# -- programmatic dependent launch -----------------------------------------------------------

def test_gdc_functions_are_no_ops_on_the_interpreter():
    gen = torch.Generator().manual_seed(11)
    x, y = torch.randn(1000, generator=gen), torch.randn(1000, generator=gen)
    out = torch.full_like(x, float("nan"))
    pdl_add[(8,)](x, y, out, 1000, BLOCK=128, USE_GDC=True, launch_pdl=True, interpret=True)
    assert torch.equal(out, x + y)


def test_gdc_functions_lower_to_griddepcontrol():
    compiled = pdl_add.compile("x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 128, "USE_GDC": True})
    body = compiled.asm["cuda"].split("extern \"C\"", 1)[-1]
    assert body.index("tlx_griddepcontrol_wait();") < body.index("tlx_griddepcontrol_launch_dependents();")
    plain = pdl_add.compile("x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 128, "USE_GDC": False})
    assert "griddepcontrol" not in plain.asm["cuda"]


def test_gdc_outside_a_kernel_is_an_error():
    with pytest.raises(CompilationError, match=r"tl.extra.cuda.gdc_wait called outside a kernel"):
        tl.extra.cuda.gdc_wait()


@tlxc.jit
def warps_as_parameter(out_ptr, num_warps: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), num_warps, tl.int32))


def test_a_parameter_named_as_a_launch_option_is_both():
    """Triton's launcher reads every keyword of a launch option's name as that option, a parameter of
    the same name included (Liger's sparsemax declares ``num_warps: tl.constexpr`` and launches with
    ``num_warps=...``): the kernel gets the value and is compiled for that many warps.  By position it
    is the parameter only, as there."""
    out = torch.zeros(256, dtype=torch.int32)
    assert warps_as_parameter.warmup(out, num_warps=8, BLOCK=256, grid=(1,)).metadata.num_warps == 8
    assert warps_as_parameter.warmup(out, 2, 256, grid=(1,)).metadata.num_warps == 4
    for warps in (8, 2, 8):         # (on the GPU the generated paths flag such a keyword: test_launch_path.py)
        warps_as_parameter[(1,)](out, num_warps=warps, BLOCK=256)
        assert (out == warps).all()
        assert L.split_launch_kwargs(warps_as_parameter, {"num_warps": warps, "BLOCK": 256}) == (
            {"num_warps": warps}, {"num_warps": warps, "BLOCK": 256})
    # a warmup's handle launched with the parameter by position (Triton's 02 softmax: num_stages) runs what it
    # compiled; another value is refused by name
    handle = warps_as_parameter.warmup(out, num_warps=8, BLOCK=256, grid=(1,))
    out.zero_()
    handle[(1,)](out, 8, 256)
    assert (out == 8).all()
    with pytest.raises(LaunchError, match="compiled with num_warps=8"):
        handle[(1,)](out, 2, 256)


def test_launch_pdl_is_part_of_the_launch_key_and_checked():
    assert L.launch_config("k", {"launch_pdl": True}).pdl is True
    assert L.launch_config("k", {"launch_pdl": False}).pdl is False
    with pytest.raises(LaunchError, match="launch_pdl must be True, False or None"):
        L.launch_config("k", {"launch_pdl": "yes"})
    x = torch.zeros(4)
    bound = (x, x, x, 4, 128, True)
    assert L.launch_key(pdl_add, bound, options={"launch_pdl": True}) != L.launch_key(pdl_add, bound)


# -- on the GPU ------------------------------------------------------------------------------

@tlxc.jit
def pdl_scale(src_ptr, dst_ptr, n, scale, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """dst = src * scale, slowly (ITERS rounds), after gdc_wait: the next PDL kernel's input."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.extra.cuda.gdc_wait()
    x = tl.load(src_ptr + offs, mask=mask)
    tl.extra.cuda.gdc_launch_dependents()
    acc = x
    for _ in range(ITERS):
        acc = acc * 1.0000001
    tl.store(dst_ptr + offs, x * scale + (acc - acc), mask=mask)


@pytest.mark.gpu
def test_gpu_launch_pdl_chain_sees_each_predecessor():
    """A chain of PDL launches, each reading what the previous one wrote: gdc_wait must order them."""
    n, links = 1 << 20, 20
    bufs = [torch.randn(n, device="cuda")] + [torch.full((n,), float("nan"), device="cuda") for _ in range(links)]
    for i in range(links):
        pdl_scale[(tlxc.cdiv(n, 1024),)](bufs[i], bufs[i + 1], n, 1.5 if i % 2 else -0.5,
                                         BLOCK=1024, ITERS=64, launch_pdl=True)
    torch.cuda.synchronize()
    ref = bufs[0].double()
    for i in range(links):
        ref = ref * (1.5 if i % 2 else -0.5)
    assert torch.allclose(bufs[-1].double(), ref, rtol=1e-5, atol=1e-30)
    compiled = pdl_scale.compiled_kernels()
    assert compiled and "griddepcontrol.wait" in compiled[-1].asm["cuda"]


@pytest.mark.gpu
def test_gpu_pdl_and_plain_launches_of_one_kernel_both_run():
    gen = torch.Generator().manual_seed(12)
    x, y = (torch.randn(5000, generator=gen).cuda() for _ in range(2))
    for pdl in (True, False, True):
        out = torch.full_like(x, float("nan"))
        pdl_add[(tlxc.cdiv(5000, 1024),)](x, y, out, 5000, BLOCK=1024, USE_GDC=pdl, launch_pdl=pdl)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)


@pytest.mark.gpu
def test_gpu_device_properties_and_warmup_match_the_launch():
    props = tlxc.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    assert props["multiprocessor_count"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert all(props[k] > 0 for k in TRITON_KEYS)
    x, y = _softmax_inputs(device="cuda")
    handle = row_softmax.warmup(y, x, x.stride(0), y.stride(0), 37, 100, BLOCK=128, num_warps=8, grid=(1,))
    handle._init_handles()
    assert torch.isnan(y).all() and handle.n_regs > 0
    launched = handle[(4, 1, 1)](y, x, x.stride(0), y.stride(0), 37, 100, 128)
    torch.cuda.synchronize()
    assert launched is handle.compiled                      # the warmup's compile served the launch
    assert torch.allclose(y.double(), torch.softmax(x.double(), dim=1), atol=1e-6)


@tlxc.jit
def threads_seen(out_ptr, num_warps: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = the CTA's thread count (%ntid.x) * 100 + the num_warps parameter."""
    offs = tl.arange(0, BLOCK)
    threads = tl.inline_asm_elementwise("mov.u32 $0, %ntid.x;", "=r,r", [offs], dtype=tl.int32, is_pure=True,
                                        pack=1)
    tl.store(out_ptr + offs, threads * 100 + num_warps)


@pytest.mark.gpu
def test_gpu_a_parameter_named_as_a_launch_option_on_the_generated_paths():
    """On the GPU, launches after the first go through the generated paths: a keyword of an option's
    name still sets both there, a position the parameter only (4 warps), in any order of keys."""
    out = torch.zeros(128, dtype=torch.int32, device="cuda")
    for warps, by_keyword in [(8, True), (8, True), (8, False), (8, True), (2, True), (2, False), (8, True)] * 2:
        out.fill_(-1)
        if by_keyword:
            threads_seen[(1,)](out, num_warps=warps, BLOCK=128)
        else:
            threads_seen[(1,)](out, warps, 128)
        torch.cuda.synchronize()
        assert (out == 32 * (warps if by_keyword else 4) * 100 + warps).all(), (warps, by_keyword, out[0].item())
