"""register_offsets (codegen_c/rules_buffers.py) and TLXC_SHARED_IMM=1: a cp.async ring's shared
addresses as one per-thread address plus a constant per register run, when the swizzle allows."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tlxc.codegen_c.rules_buffers import register_offsets
from tlxc.ir.layouts import Layout
from tlxc.ir.types import f16
from tlxc.passes.shared_layouts import swizzle_offset

# [128, 64] f16 rows of 128 bytes, 128-byte NVMMA swizzle, 8 warps, 16-byte runs along the row:
# lanes 0-7 walk a row's 8 chunks, lanes 8-31 and the warps the rows 1..31; registers 0-7 are one
# run, registers 8 and 16 step 32 and 64 rows (the tutorial's A tile).
ROWS_BY_32 = Layout((128, 64), register=[(0, 1), (0, 2), (0, 4), (32, 0), (64, 0)],
                    lane=[(0, 8), (0, 16), (0, 32), (1, 0), (2, 0)], warp=[(4, 0), (8, 0), (16, 0)])
# the same tile with registers 8 and 16 stepping 1 and 2 rows: those move the swizzle's phase
ROWS_BY_1 = Layout((128, 64), register=[(0, 1), (0, 2), (0, 4), (1, 0), (2, 0)],
                   lane=[(0, 8), (0, 16), (0, 32), (4, 0), (8, 0)], warp=[(16, 0), (32, 0), (64, 0)])


def _lw(view, swizzle=128, align=1024):
    return SimpleNamespace(view_swizzle={id(view): swizzle}, view_align={id(view): align})


def _address(layout, register, lane, warp):
    row, col = layout.apply(register, lane, warp)
    return swizzle_offset((row * 64 + col) * 2, 128) // 2


def test_rows_a_multiple_of_eight_apart_are_one_address_plus_constants():
    view = object()
    runs = register_offsets(_lw(view), view, ROWS_BY_32, (64, 1), f16, 8)
    assert runs == [0, 32 * 64, 64 * 64, 96 * 64]
    for r, offset in zip(range(0, 32, 8), runs):          # the claim, thread by thread
        for warp in range(8):
            for lane in range(32):
                assert _address(ROWS_BY_32, r, lane, warp) == _address(ROWS_BY_32, 0, lane, warp) + offset


def test_rows_that_move_the_swizzle_phase_are_not_split():
    view = object()
    assert register_offsets(_lw(view), view, ROWS_BY_1, (64, 1), f16, 8) is None


@pytest.mark.parametrize("swizzle,align", [(0, 1024), (128, 128)])
def test_unswizzled_or_out_of_phase_views_are_left_alone(swizzle, align):
    view = object()
    assert register_offsets(_lw(view, swizzle, align), view, ROWS_BY_32, (64, 1), f16, 8) is None


def test_column_blocked_operand_tile():
    """The tutorial's B tile, [64, 256] f16 stored as 4 column blocks of [64, 64] (8192 bytes
    apart): each warp copies one row, registers 8.. step 8 rows."""
    layout = Layout((64, 256), register=[(0, 1), (0, 2), (0, 4), (8, 0), (16, 0), (32, 0)],
                    lane=[(0, 8), (0, 16), (0, 32), (0, 64), (0, 128)], warp=[(1, 0), (2, 0), (4, 0)])
    view = object()
    lw = _lw(view)
    runs = register_offsets(lw, view, layout, (64, 1), f16, 8, block=(64, 64 * 64))
    assert runs == [8 * 64 * r for r in range(8)]


def test_matmul_cuda_with_the_switch(monkeypatch):
    """TLXC_SHARED_IMM=1: the pipelined matmul's copies index a constant table of run offsets;
    without it, each run's address goes through the swizzle on its own."""
    import kernels_dot_wgmma as K
    sig = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32,K=i32:16,stride_am=i32:16,stride_ak=i32:1,"
           "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16")

    def cuda():
        return K.tile_matmul.compile(sig, {"BM": 128, "BN": 128, "BK": 64}, stages=("cuda",)).asm["cuda"]
    monkeypatch.setenv("TLXC_SHARED_IMM", "0")
    plain = cuda()
    monkeypatch.setenv("TLXC_SHARED_IMM", "1")
    split = cuda()
    assert "const int run" not in plain
    copies = [line for line in split.splitlines() if "tlx_cp_async_16(" in line and "static" not in line]
    assert copies and all("run" in line and "[(i) / 8]" in line for line in copies)


def _copy_addresses(cuda: str) -> list[list[int]]:
    """Every cp.async's shared byte offset (from its buffer view) for every thread and register
    run, evaluated from the generated CUDA's own expressions (its thread terms, its tables)."""
    import re
    lines = cuda.splitlines()
    terms = {m.group(1): m.group(2) for m in (re.match(r"\s*const int (t[cf]\d+) = (.*);$", s) for s in lines) if m}
    tables = {m.group(1): [int(v) for v in m.group(2).split(",")]
              for m in (re.match(r"\s*const int (run\w*)\[\d+\] = \{(.*)\};$", s) for s in lines) if m}

    def python(expr: str) -> str:
        expr = re.sub(r"\(reinterpret_cast<unsigned short\*>\((.*)\) \+ (run\w*)\[\(i\) / (\d+)\]\)",
                      r"((\1) + 2 * \2[(i) // \3])", expr)
        expr = re.sub(r"reinterpret_cast<unsigned char\*>\(\w+\)", "0", expr)
        expr = expr.replace("reinterpret_cast<unsigned short*>", "")
        return re.sub(r"(?<![/])/(?![/])", "//", expr)
    found = []
    for at, line in enumerate(lines):
        if "tlx_cp_async_16(" not in line or "static" in line:
            continue
        loop = re.match(r"\s*for \(int i = 0; i < (\d+); i \+= (\d+)\)", lines[at - 1])
        dst = line.strip()[len("tlx_cp_async_16("):].rsplit(", ", 2)[0]
        code = compile(python(dst), "<dst>", "eval")
        out = []
        for warp in range(8):
            for lane in range(32):
                env = {"lane": lane, "warp": warp, **tables}
                for name, text in terms.items():
                    env[name] = eval(python(text), {}, env)
                out += [eval(code, {}, {**env, "i": i}) for i in range(0, int(loop.group(1)), int(loop.group(2)))]
        found.append(out)
    return found


@pytest.mark.parametrize("bn,num_warps", [(128, 4), (256, 8)])
def test_split_addresses_equal_the_plain_ones_thread_by_thread(bn, num_warps, monkeypatch):
    """End to end: with TLXC_SHARED_IMM=1 every cp.async of the pipelined matmul writes the same
    shared byte, for every thread and register run, as without it (the generated expressions
    evaluated, not register_offsets' own model)."""
    import kernels_dot_wgmma as K
    sig = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32:16,N=i32:16,K=i32:16,stride_am=i32:16,stride_ak=i32:1,"
           "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16")

    def cuda():
        return K.tile_matmul.compile(sig, {"BM": 128, "BN": bn, "BK": 64}, num_warps=num_warps,
                                     stages=("cuda",)).asm["cuda"]
    monkeypatch.setenv("TLXC_SHARED_IMM", "0")
    plain = _copy_addresses(cuda())
    monkeypatch.setenv("TLXC_SHARED_IMM", "1")
    text = cuda()
    split = _copy_addresses(text)
    assert "const int run" in text and len(plain) == len(split) >= 6
    assert plain == split
