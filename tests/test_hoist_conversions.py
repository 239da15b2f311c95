"""hoist-conversions (passes/hoist_conversions.py): a value a loop carries and converts in every
iteration is carried in the converted layout, its sources converted where they are computed."""
from __future__ import annotations

import re

import kernels_flat_persistent as K

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx

SIG = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32,K=i32,s_am=i32:16,s_bk=i32:16,s_cm=i32:16"


def _loop_top_level(text: str) -> list[str]:
    """The lines at the top level of the (outermost) scf.for's body."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "scf.for" in line) + 1
    while lines[start].lstrip().startswith("^"):           # the body's block arguments
        start += 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start:]:
        depth = len(line) - len(line.lstrip())
        if depth < indent:
            break
        if depth == indent:
            body.append(line)
    return body


def _ir(kfn, sig, meta, skip=""):
    import os
    old = os.environ.get("TLXC_SKIP_PASSES")
    os.environ["TLXC_SKIP_PASSES"] = skip
    try:
        return kfn.compile(sig, meta, num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
    finally:
        if old is None:
            os.environ.pop("TLXC_SKIP_PASSES", None)
        else:
            os.environ["TLXC_SKIP_PASSES"] = old


def test_persistent_matmul_converts_its_tile_offsets_once_per_tile():
    meta = {"BM": 64, "BN": 64, "BK": 32, "PROGRAMS": 4}
    before = _loop_top_level(_ir(K.flat_persistent_matmul, SIG, meta, skip="hoist-conversions"))
    after_text = _ir(K.flat_persistent_matmul, SIG, meta)
    after = _loop_top_level(after_text)
    assert sum("tl.convert_layout" in line for line in before) == 2        # rows and cols, every K step
    assert not any("tl.convert_layout" in line for line in after)
    # the conversions moved under `if kk == 0:` (and before the loop), into the carried layout
    assert after_text.count("tl.convert_layout") >= 2


@tlxc.jit
def _carried_and_stored(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for i in range(n):
        if i % 4 == 0:
            rows = tl.arange(0, BLOCK) + i
        acc += tl.load(x_ptr + rows[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]).to(tl.float32)
        tl.store(y_ptr + i * BLOCK + tl.arange(0, BLOCK), rows)          # rows used as they are, too
    tl.store(x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], acc.to(tl.float16))


def test_a_carried_value_with_another_use_keeps_its_layout():
    text = _ir(_carried_and_stored, "x_ptr=*fp16,y_ptr=*i32,n=i32", {"BLOCK": 64})
    base = _ir(_carried_and_stored, "x_ptr=*fp16,y_ptr=*i32,n=i32", {"BLOCK": 64}, skip="hoist-conversions")
    assert re.sub(r"#L\d+", "", text) == re.sub(r"#L\d+", "", base)


@tlxc.jit
def _recomputed_by_some_threads(x_ptr, n, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), tl.float32)
    for i in range(n):
        if tlx.thread_id(0) < 32:                                  # a branch some threads take
            rows = tl.arange(0, BLOCK) + i
        acc += tl.load(x_ptr + rows[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]).to(tl.float32)
    tl.store(x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], acc.to(tl.float16))


def test_sources_under_a_thread_dependent_branch_are_not_converted_there():
    """A conversion syncs the threads, so it cannot move under ``if tlx.thread_id(0) < 32``:
    the per-iteration conversion stays."""
    sig, meta = "x_ptr=*fp16,n=i32", {"BLOCK": 64}
    text = _ir(_recomputed_by_some_threads, sig, meta)
    assert any("tl.convert_layout" in line for line in _loop_top_level(text))
    base = _ir(_recomputed_by_some_threads, sig, meta, skip="hoist-conversions")
    assert re.sub(r"#L\d+", "", text) == re.sub(r"#L\d+", "", base)
