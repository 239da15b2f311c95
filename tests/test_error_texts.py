"""Error texts that ported Triton/TLX tests read: a loop-carried variable whose type changes
says so in Triton's words too.  A located CompilationError chains the rule's exception as its
``__cause__``, as Triton does, without frames (tests/test_errors.py::
test_traceback_hides_compiler_internals)."""
from __future__ import annotations

import traceback

import pytest

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx


@tlxc.jit
def fp8_name_of(out_ptr, DTYPE: tl.constexpr):
    name: tl.constexpr = tlx.get_fp8_format_name(DTYPE)
    tl.store(out_ptr, len(name))


@tlxc.jit
def view_replaces_its_buffers():
    bufs = tlx.local_alloc((16, 16), tl.int16, tl.constexpr(2))
    keep = bufs
    for _ in range(0, 4):
        bufs = tlx.local_view(keep, 0)
        tlx.local_store(bufs, tl.zeros((16, 16), dtype=tl.int16))


@tlxc.jit
def accumulator_changes_dtype(out_ptr):
    acc = tl.zeros((16,), dtype=tl.float16)
    for _ in range(0, 4):
        acc = acc.to(tl.float32) + 1.0
    tl.store(out_ptr + tl.arange(0, 16), acc)


def test_a_rule_error_is_located_and_chains_the_rule_error():
    with pytest.raises(tlxc.CompilationError) as info:
        fp8_name_of.compile("out_ptr=*i32", {"DTYPE": tl.float32})
    assert "only supports tl.float8e5" in str(info.value)
    assert "test_error_texts.py:" in str(info.value)          # the user's line
    assert "only supports tl.float8e5" in str(info.value.__cause__)      # what TLX's own test reads
    assert info.value.__cause__.__traceback__ is None


def test_fp8_names_still_compile():
    fp8_name_of.compile("out_ptr=*i32", {"DTYPE": tl.float8e4nv})


def test_a_buffer_variable_reassigned_to_a_view_names_the_fix():
    with pytest.raises(tlxc.CompilationError) as info:
        view_replaces_its_buffers.compile("", {})
    text = "".join(traceback.format_exception(info.type, info.value, info.tb))
    assert "Please make sure that the type stays consistent" in text
    assert "give the view another name" in text and "num=2" in text


def test_a_tensor_changing_dtype_in_a_loop_names_the_fix():
    with pytest.raises(tlxc.CompilationError) as info:
        accumulator_changes_dtype.compile("out_ptr=*fp32", {})
    message = str(info.value)
    assert "Please make sure that the type stays consistent" in message and ".to(...)" in message
