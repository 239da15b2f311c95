"""Python's min()/max() on runtime scalars and tensors, as Triton allows them.

GEMM kernels clamp their group size with ``min(num_pid_m - first_pid_m, GROUP_M)``;
Triton lowers a builtin ``min``/``max`` with runtime arguments to
``tl.minimum``/``tl.maximum``.  These tests run on the interpreter and compile
for sm_90a (no GPU needed).
"""
from __future__ import annotations

import os

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.interpreter import interpret


@tlxc.jit
def grouped_tile_ids(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Each program writes the (pid_m, pid_n) of Triton's grouped ordering."""
    pid = tl.program_id(0)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


@tlxc.jit
def clamp_rows(x_ptr, lo_ptr, out_ptr, n, hi, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    lo = tl.load(lo_ptr + offs, mask=mask)
    # three arguments, a tensor against a runtime scalar, and a tuple argument
    y = max(x, lo, -hi)
    y = min((y, hi))
    tl.store(out_ptr + offs, y, mask=mask)


def _grouped_reference(num_pid_m, num_pid_n, group_m):
    ids = []
    for pid in range(num_pid_m * num_pid_n):
        group_id = pid // (group_m * num_pid_n)
        first = group_id * group_m
        size = builtins_min(num_pid_m - first, group_m)
        ids += [first + (pid % (group_m * num_pid_n)) % size, (pid % (group_m * num_pid_n)) // size]
    return torch.tensor(ids, dtype=torch.int32)


builtins_min = min


@pytest.mark.parametrize("num_pid_m,num_pid_n,group_m", [(7, 5, 4), (3, 9, 8), (1, 1, 8)])
def test_min_on_runtime_scalars(num_pid_m, num_pid_n, group_m):
    grid = num_pid_m * num_pid_n
    out = torch.full((2 * grid,), -1, dtype=torch.int32)
    interpret(grouped_tile_ids, (grid,), (out, num_pid_m, num_pid_n), {"GROUP_M": group_m})
    assert torch.equal(out, _grouped_reference(num_pid_m, num_pid_n, group_m))


def test_min_max_on_tensors():
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    n, hi = 1000, 0.75
    x, lo = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    out = torch.full((n,), float("nan"))
    interpret(clamp_rows, (triton_cdiv(n, 256),), (x, lo, out, n, hi), {"BLOCK": 256})
    expected = torch.minimum(torch.maximum(torch.maximum(x, lo), torch.tensor(-hi)), torch.tensor(hi))
    assert torch.equal(out, expected)


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_min_compiles_for_sm90a():
    kernel = grouped_tile_ids.compile(signature="out_ptr=*i32,num_pid_m=i32,num_pid_n=i32",
                                      constexprs={"GROUP_M": 8}, arch="sm_90a")
    assert "group_size_m = (int)((s_2 < s_3 ? s_2 : s_3));" in kernel.asm["cuda"]
    assert kernel.asm["cubin"]


@tlxc.jit
def min_with_key(x_ptr, n):
    m = min(n, 4, key=abs)
    tl.store(x_ptr, m)


@tlxc.jit
def min_of_one(x_ptr, n):
    m = min((n,))
    tl.store(x_ptr, m)


@pytest.mark.parametrize("kernel,message", [
    (min_with_key, "Python's min() on runtime values takes no keyword arguments (got key)"),
    (min_of_one, "Python's min() needs at least two values here, got 1"),
])
def test_min_errors(kernel, message):
    with pytest.raises(CompilationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        interpret(kernel, (1,), (torch.zeros(1, dtype=torch.int32), 3), {})
