"""The host side that Triton/TLX code uses, under tlxc's names: descriptors
whose box an autotune pre_hook sets, the autotuner's Triton arguments, the
host helpers (cdiv, next_power_of_2, set_allocator, runtime.driver.active,
tlxc.testing), and the command line on autotuned and nested kernels."""
from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.cli import main
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx
from tlxc.runtime.autotune import AutotuneWarning


@tlxc.jit
def scaled_tile(in_desc, out_ptr, n_rows, n_cols, scale, BM: tl.constexpr, BN: tl.constexpr):
    """out = in * scale: one BM x BN box per program through TMA, stored through pointers
    (masked, so the shape need not be a multiple of the box)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [pid_m * BM, pid_n * BN], bar[0])
    tlx.barrier_wait(bar[0], 0)
    x = tlx.local_load(buf[0])
    rows = pid_m * BM + tl.arange(0, BM)[:, None]
    cols = pid_n * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + rows * n_cols + cols, x * scale, mask=(rows < n_rows) & (cols < n_cols))


def set_box(nargs):
    nargs["in_desc"].block_shape = [nargs["BM"], nargs["BN"]]


BOXES = [tlxc.Config({"BM": 8, "BN": 16}, num_warps=4, pre_hook=set_box),
         tlxc.Config({"BM": 16, "BN": 8}, num_warps=4, pre_hook=set_box)]


def grid(meta):
    return (tlxc.cdiv(meta["n_rows"], meta["BM"]), tlxc.cdiv(meta["n_cols"], meta["BN"]))


def inputs(device="cpu", rows=37, cols=44):
    x = torch.randn(rows, cols, device=device)
    out = torch.full_like(x, float("nan"))          # poisoned: every element must be written
    return x, out


def placeholder_descriptor(x):
    # as Triton tutorials write it: the box is a placeholder until a pre_hook sets it
    from tlxc.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(x, x.shape, x.stride(), [1, 1])


def fake_timer(times_by_bm):
    def do_bench(fn, quantiles=None):
        fn()
        return [times_by_bm[current_box[0]], 0.0, 0.0] if quantiles else times_by_bm[current_box[0]]
    current_box = [None]
    return do_bench, current_box


# -- descriptors ------------------------------------------------------------------------------------

def test_triton_import_path_and_constructor_forms():
    from tlxc.tools.tensor_descriptor import TensorDescriptor
    assert TensorDescriptor is tlxc.TensorDescriptor
    x = torch.zeros(64, 32)
    positional = TensorDescriptor(x, [64, 32], [32, 1], [16, 16], "nan")
    keywords = TensorDescriptor(x, shape=[64, 32], strides=[32, 1], block_shape=[16, 16], padding="nan")
    assert positional.ir_type() == keywords.ir_type() == TensorDescriptor.from_tensor(x, [16, 16]).ir_type()
    assert positional.padding == "nan" and positional.block_shape == (16, 16)


def test_placeholder_box_is_checked_when_the_launch_uses_it():
    x, out = inputs()
    desc = placeholder_descriptor(x)                              # [1, 1] of f32: 4 bytes inner
    with pytest.raises(tlxc.LaunchError, match=r"argument 'in_desc' of scaled_tile: TensorDescriptor: "
                                               r"'block_shape' inner dimension is 1 x f32 = 4 bytes"):
        scaled_tile[(1, 1)](desc, out, 37, 44, 2.0, BM=8, BN=16)
    with pytest.raises(tlxc.LaunchError, match=r"'block_shape' dimension 0 is 500"):
        desc.block_shape = [500, 16]                 # the range is checked at once (512 = two 256-row copies)
    assert desc.block_shape == (1, 1)                              # a refused assignment changes nothing


def test_changed_box_changes_the_specialization():
    x, out = inputs()
    desc = placeholder_descriptor(x)
    keys = []
    for box in ([8, 16], [16, 8], [8, 16]):
        desc.block_shape = box
        args = {"in_desc": desc, "out_ptr": out, "n_rows": 37, "n_cols": 44, "scale": 2.0,
                "BM": box[0], "BN": box[1]}
        keys.append(specialization_from_args(scaled_tile, args).key())
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_pre_hook_sets_the_box_of_each_config_on_the_interpreter():
    x, out = inputs()
    desc = placeholder_descriptor(x)
    bench, current = fake_timer({8: 2.0, 16: 1.0})

    def recording_hook(nargs):
        set_box(nargs)
        current[0] = nargs["BM"]
    configs = [tlxc.Config(c.kwargs, num_warps=c.num_warps, pre_hook=recording_hook) for c in BOXES]
    tuned = tlxc.autotune(configs, key=["n_rows", "n_cols"], do_bench=bench, cache_results=False)(scaled_tile)
    tuned[grid](desc, out, 37, 44, 2.0)
    assert tuned.best_config.kwargs == {"BM": 16, "BN": 8}          # the faster one by the fake timer
    assert desc.block_shape == (16, 8)                              # set by its pre_hook for the real launch
    torch.testing.assert_close(out, x * 2.0)


def test_kernel_fn_of_an_autotuned_kernel_launches_with_a_box_set_by_hand():
    x, out = inputs()
    desc = placeholder_descriptor(x)
    tuned = tlxc.autotune(BOXES, key=["n_rows"])(scaled_tile)
    desc.block_shape = [8, 16]
    tuned.fn[(5, 3)](desc, out, 37, 44, 3.0, BM=8, BN=16)
    torch.testing.assert_close(out, x * 3.0)


@pytest.mark.gpu
def test_gpu_changed_box_recompiles_instead_of_reusing_the_cubin():
    x, out = inputs("cuda", rows=301, cols=200)
    desc = placeholder_descriptor(x)
    for bm, bn, scale in ((8, 16, 2.0), (16, 8, 3.0), (8, 16, 4.0)):
        desc.block_shape = [bm, bn]
        out.fill_(float("nan"))
        scaled_tile[(tlxc.cdiv(301, bm), tlxc.cdiv(200, bn))](desc, out, 301, 200, scale, BM=bm, BN=bn)
        torch.testing.assert_close(out, x * scale)


@pytest.mark.gpu
def test_gpu_autotune_with_pre_hook_boxes_and_cuda_graph_timing():
    x, out = inputs("cuda", rows=301, cols=200)
    desc = placeholder_descriptor(x)
    tuned = tlxc.autotune(BOXES, key=["n_rows", "n_cols"], use_cuda_graph=True, cache_results=False)(scaled_tile)
    tuned[grid](desc, out, 301, 200, 2.0)
    assert set(tuned.configs_timings) == set(BOXES)
    assert all(0 < ms < float("inf") for ms in tuned.configs_timings.values())
    torch.testing.assert_close(out, x * 2.0)


# -- the autotuner's Triton arguments ------------------------------------------------------------

def test_unknown_key_name_warns_and_is_ignored():
    with pytest.warns(AutotuneWarning, match=r"key 'SEQ_LEN' is no argument of the kernel and is ignored"):
        tuned = tlxc.autotune(BOXES, key=["n_rows", "SEQ_LEN"])(scaled_tile)
    assert tuned.keys == ["n_rows"]


def test_do_bench_is_called_as_triton_calls_it():
    calls = []

    def triton_style(fn, quantiles=None):
        calls.append(quantiles)
        fn()
        return [1.0, 0.5, 1.5]

    def plain(fn):
        fn()
        return 1.0
    x, out = inputs()
    for timer, expected in ((triton_style, (0.5, 0.2, 0.8)), (plain, None)):
        calls.clear()
        tuned = tlxc.autotune(BOXES, key=["n_rows"], do_bench=timer, cache_results=False)(scaled_tile)
        tuned[grid](placeholder_descriptor(x), out, 37, 44, 2.0)
        assert calls == ([expected] * 2 if expected else [])
        torch.testing.assert_close(out, x * 2.0)


def test_use_cuda_graph_and_warmup_rep_are_taken():
    tuned = tlxc.autotune(BOXES, key=["n_rows"], use_cuda_graph=True)(scaled_tile)
    assert tuned.use_cuda_graph and tuned.rep == 20         # Triton's do_bench_cudagraph default
    tuned = tlxc.autotune(BOXES, key=["n_rows"], warmup=5, rep=7)(scaled_tile)
    assert (tuned.warmup, tuned.rep, tuned.use_cuda_graph) == (5, 7, False)


def test_config_takes_tritons_fields():
    config = tlxc.Config({"BM": 8}, 8, 2, 1, None, set_box)          # Triton's positional order
    assert (config.num_warps, config.num_stages, config.pre_hook) == (8, 2, set_box)
    assert tlxc.Config({}, maxnreg=128).maxnreg == 128       # honoured at launch (__maxnreg__)
    with pytest.raises(TypeError, match="ir_override"):
        tlxc.Config({}, ir_override="kernel.ttgir")


# -- host helpers ---------------------------------------------------------------------------------

def test_cdiv_next_power_of_2_and_set_allocator():
    assert [tlxc.cdiv(n, 16) for n in (1, 16, 17, 0)] == [1, 1, 2, 0]
    assert [tlxc.next_power_of_2(n) for n in (0, 1, 2, 3, 64, 65)] == [1, 1, 2, 4, 64, 128]
    from tlxc.host import get_allocator

    def allocate(size, align, stream):
        return torch.empty(size, dtype=torch.int8)
    tlxc.set_allocator(allocate)
    assert get_allocator() is allocate
    tlxc.set_allocator(None)
    with pytest.raises(TypeError, match="callable"):
        tlxc.set_allocator(42)


def test_driver_active_describes_this_machine():
    active = tlxc.runtime.driver.active
    if torch.cuda.is_available():
        assert active.get_current_target().backend == "cuda"
        assert active.get_active_torch_device().type == "cuda"
    else:
        assert active.get_current_target().backend == "cpu"       # a tutorial's is_cuda() is False
        assert active.get_active_torch_device() == torch.device("cpu")


def test_do_bench_summaries():
    ticks = []

    def work():
        ticks.append(sum(range(2000)))
    mean = tlxc.testing.do_bench(work, warmup=1, rep=5)
    median, low, high = tlxc.testing.do_bench(work, warmup=1, rep=5, quantiles=[0.5, 0.2, 0.8])
    assert isinstance(mean, float) and mean > 0 and low <= median <= high
    assert isinstance(tlxc.testing.do_bench(work, warmup=1, rep=5, return_mode="all"), list)
    with pytest.raises(ValueError, match="return_mode"):
        tlxc.testing.do_bench(work, return_mode="p50")


def test_assert_close():
    x = torch.randn(33, dtype=torch.float16)
    tlxc.testing.assert_close(x, x.double() + 0.005)
    with pytest.raises(AssertionError):
        tlxc.testing.assert_close(x, x.double() + 0.5)


def test_perf_report_prints_and_returns_the_table(capsys):
    bench = tlxc.testing.Benchmark(x_names=["n"], x_vals=[1, 2, 3], line_arg="provider",
                                   line_vals=["a", "b"], line_names=["A", "B"], plot_name="toy",
                                   args={"scale": 10})

    @tlxc.testing.perf_report(bench)
    def measure(n, provider, scale):
        return n * scale if provider == "a" else (n * scale + 1, n * scale, n * scale + 2)
    table = measure.run(print_data=True, return_df=True, diff_col=True)
    printed = capsys.readouterr().out
    assert "toy:" in printed and "Diff" in printed
    rows = table.to_dict("records") if hasattr(table, "to_dict") else table
    assert [(r["n"], r["A"], r["B"], r["Diff"]) for r in rows] == [(1, 10, 11, 1), (2, 20, 21, 1), (3, 30, 31, 1)]


# -- the command line on autotuned and nested kernels ---------------------------------------------

TUNED_FILE = '''
import tlxc as triton
import tlxc.language as tl
from tlxc.language import tlx

def set_boxes(nargs):
    nargs["in_desc"].block_shape = [nargs["BM"], nargs["BN"]]

@triton.autotune(configs=[triton.Config({"BM": 64, "BN": 64}, num_warps=4, pre_hook=set_boxes),
                          triton.Config({"BM": 128, "BN": 32}, num_warps=8, pre_hook=set_boxes)],
                 key=["n_rows", "UNUSED_KEY"], use_cuda_graph=True)
@triton.jit
def scaled(in_desc, out_ptr, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(in_desc), 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [tl.program_id(0) * BM, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    x = tlx.local_load(buf[0])
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(out_ptr + rows * n_cols + cols, x, mask=(rows < n_rows) & (cols < n_cols))

@triton.heuristics({"EVEN": lambda args: args["n_cols"] % args["BLOCK"] == 0})
@triton.jit
def copy_row(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n_cols), mask=offs < n_cols)

def test_in_a_function():
    @triton.jit
    def double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

if __name__ == "__main__":
    raise SystemExit("the CLI must not run this")
'''

SIGNATURE = "in_desc=tensordesc<fp16>,out_ptr=*fp16,n_rows=i32,n_cols=i32"


def run_cli(capsys, tmp_path: Path, *argv) -> tuple[int, str, str]:
    path = tmp_path / "tuned.py"
    path.write_text(textwrap.dedent(TUNED_FILE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutotuneWarning)      # the file's unknown key
        code = main([str(a) for a in ("compile", path, *argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_compiles_the_first_config_of_an_autotuned_kernel(tmp_path, capsys):
    code, out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "scaled", "--signature", SIGNATURE)
    assert code == 0, err
    assert "%in_desc: tensordesc<64x64xf16, swizzle=128>" in out       # the box config 0's pre_hook sets
    assert "num_warps = 4" in out


def test_cli_compiles_every_config(tmp_path, capsys):
    code, _out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "scaled", "--signature",
                              SIGNATURE, "--config", "all", "--emit", "ir", "-o", tmp_path / "out")
    assert code == 0, err
    second = (tmp_path / "out" / "scaled.config1.ir").read_text()
    assert "tensordesc<128x32xf16, swizzle=64>" in second and "num_warps = 8" in second
    assert (tmp_path / "out" / "scaled.config0.ir").exists()
    code, _out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "scaled", "--signature",
                              SIGNATURE, "--config", "2")
    assert code == 2 and "scaled has 2 autotune config(s) (0 to 1)" in err


def test_cli_heuristics_value_needs_its_inputs(tmp_path, capsys):
    base = ("--arch", "sm_90a", "--kernel", "copy_row", "--signature", "x_ptr=*fp32,out_ptr=*fp32,n_cols=i32",
            "-D", "BLOCK=128")
    code, _out, err = run_cli(capsys, tmp_path, *base)
    assert code == 2 and "@heuristics value 'EVEN' needs launch arguments" in err and "-D EVEN=VALUE" in err
    code, out, err = run_cli(capsys, tmp_path, *base, "-D", "EVEN=True")
    assert code == 0, err
    assert "tl.kernel @copy_row" in out


def test_cli_finds_a_kernel_defined_inside_a_function(tmp_path, capsys):
    code, out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "test_in_a_function.double",
                             "--signature", "x_ptr=*fp32,n=i32", "-D", "BLOCK=64")
    assert code == 0, err
    assert "tl.kernel @double" in out and 'loc("tuned.py":' in out
    code, out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "double",
                             "--signature", "x_ptr=*fp32,n=i32", "-D", "BLOCK=64")
    assert code == 0, err                                              # the plain name, when unique


def test_cli_check_sees_autotuned_kernels(tmp_path, capsys):
    path = tmp_path / "tuned.py"
    path.write_text(textwrap.dedent(TUNED_FILE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutotuneWarning)
        code = main(["check", str(path), "--kernel", "scaled", "--signature", SIGNATURE, "--config", "all"])
    assert code == 0, capsys.readouterr().err


def test_cli_descriptor_without_a_box_needs_a_pre_hook(tmp_path, capsys):
    code, _out, err = run_cli(capsys, tmp_path, "--arch", "sm_90a", "--kernel", "test_in_a_function.double",
                              "--signature", "x_ptr=tensordesc<fp32>,n=i32", "-D", "BLOCK=64")
    assert code == 2 and "descriptor parameter 'x_ptr' of double has no box" in err
