"""The pointer GEMM (kernels/gemm_dot.py) on sizes that are multiples of 8 but not of 16
elements (N = 3000, K = 776 of bf16): the host's divisibility facts (``ALIGNS``,
``matmul.dot_aligns``) give 16-byte cp.async loads and vector stores where the launch's
"divisible by 16" specialization alone gave 2-byte loads, 255 registers and spills; and the
kernel stays correct in the interpreter on such sizes (and on 4- and 2-element ones); the
same for the single-row kernel (kernels/gemv.py) against a weight of K = 776."""
from __future__ import annotations

import re

import pytest
import torch
from matmul_checks import operands

from tlxc.ops import CONFIGS, matmul
from tlxc.ops.matmul import compile_config, dot_aligns

BF16_TOL = 8e-3


def test_facts_are_the_power_of_two_the_launch_does_not_know():
    # strides (am, ak, bk, bn, cm, cn) of a row-major [1000, 776] @ [776, 3000] -> [1000, 3000]
    assert dot_aligns(1000, 3000, 776, (776, 1, 3000, 1, 3000, 1), 1) == (8, 1, 8, 1, 8, 1, 1, 8, 8)
    # divisible by 16: the launch knows it already; 1 is the constant 1; odd: nothing
    assert dot_aligns(1024, 4096, 4096, (4096, 1, 4096, 1, 4096, 1), 1) == (1,) * 9
    assert dot_aligns(1001, 3001, 777, (777, 1, 3001, 1, 3001, 1), 1) == (1,) * 9
    assert dot_aligns(1000, 3004, 778, (778, 1, 3004, 1, 3004, 1), 1) == (2, 1, 4, 1, 4, 1, 1, 4, 2)
    # M (a token count) only where a vector runs along it: an M-major A or a column-major C
    assert dot_aligns(1000, 3000, 776, (1, 1000, 3000, 1, 3000, 1), 1)[6] == 8
    # N only along a unit stride of B or C, or for split-K's partials (rows of N floats)
    assert dot_aligns(1000, 3000, 776, (776, 1, 1, 776, 1, 1000), 1)[7] == 1
    assert dot_aligns(1000, 3000, 776, (776, 1, 1, 776, 1, 1000), 4)[7] == 8


def _accesses(handle) -> dict:
    src = handle.asm["cuda"]
    return {"cp16": len(re.findall(r"\btlx_cp_async_16\(", src)),
            "cp_narrow": len(re.findall(r"\btlx_cp_async_(?:4|8)\(", src)),
            # a synchronous element-wise copy into shared memory: `... = (mask) ? *ptr : 0`
            "scalar": len(re.findall(r"\? \*\w+\[i\] : \(unsigned short\)", src))}


@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (False, True), (True, False)])
def test_operands_of_8_element_rows_load_16_bytes_without_spills(a_mmajor, b_kmajor):
    a, b = operands(1000, 3000, 776, a_mmajor=a_mmajor, b_kmajor=b_kmajor)
    (h,) = compile_config("dot_128x128x64_s3_w4", a, b)
    acc = _accesses(h)
    assert acc["scalar"] == 0 and acc["cp_narrow"] == 0, acc
    assert acc["cp16"] >= 2, acc          # A's and B's loads (each once or more after unrolling)
    assert h.n_spills == 0 and h.n_regs < 255, (h.n_regs, h.n_spills)


def test_split_k_partials_and_c_of_8_element_rows_are_vector_accesses():
    a, b = operands(1000, 3000, 776)
    (h,) = compile_config("dot_128x128x64_s3_w4_k4", a, b)
    src = h.asm["cuda"]
    assert not re.search(r"\btlx_(?:st_global|ld_global\w*)_b32\(", src)     # float by float
    assert re.search(r"\btlx_ld_global\w*_b128\(", src)                        # the partials' sum
    assert h.n_spills == 0, h.n_spills


@pytest.mark.parametrize("config", ["dot_64x128x64_s4_w4", "dot_64x64x64_s4_w4_k4", "swap_64x64x64_s4_w4_k4"])
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (True, True)])
@pytest.mark.parametrize("unit", [8, 4, 2])
def test_interpreter_is_exact_on_sizes_of_8_4_2_elements(config, a_mmajor, b_kmajor, unit):
    M = 3 * unit if CONFIGS[config].swap else 17 * unit
    N, K = 25 * unit, unit * (450 // unit | 1)            # K: 8 tiles of 64, for split-K
    a, b = operands(M, N, K, a_mmajor=a_mmajor, b_kmajor=b_kmajor, seed=unit)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    bias = torch.randn(N).to(torch.bfloat16)
    matmul(a, b, out, bias=bias, config=config)
    ref = a.double() @ b.double() + bias.double()
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


def _element_loads(src: str) -> int:
    return len(re.findall(r"[=?] \*\w+\[i\]", src))


def test_single_row_kernel_reads_a_weight_of_8_element_rows_with_16_byte_loads():
    a = torch.empty(1, 776, dtype=torch.bfloat16)
    (h,) = compile_config("gemv_8x512_s1_w4", a, torch.empty(3000, 776, dtype=torch.bfloat16).t())
    (ref,) = compile_config("gemv_8x512_s1_w4", torch.empty(1, 784, dtype=torch.bfloat16),
                            torch.empty(3000, 784, dtype=torch.bfloat16).t())
    src = h.asm["cuda"]
    assert _element_loads(src) == 0, _element_loads(src)
    assert src.count("tlx_ld_global_b128(") == ref.asm["cuda"].count("tlx_ld_global_b128(")
    assert h.n_regs <= ref.n_regs + 8, (h.n_regs, ref.n_regs)


@pytest.mark.parametrize("unit", [8, 4, 2])
def test_single_row_kernel_is_exact_on_sizes_of_8_4_2_elements(unit):
    N, K = 25 * unit, unit * (450 // unit | 1)
    g = torch.Generator().manual_seed(unit)
    a = torch.randn(1, K, generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, generator=g).to(torch.bfloat16).t()
    out = torch.full((1, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, config="gemv_8x512_s1_w4")
    ref = a.double() @ b.double()
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL
