"""``<<`` and ``>>`` on integers of every width, as PTX ``shl`` / ``shr`` and the interpreter define them:
the amount read as an unsigned of the operand's width; an amount of at least the width shifts every bit out
(``>>`` of a signed value leaves its sign); ``<<`` wraps.  C leaves those amounts undefined (x86 and AMD
take them modulo the width), so the generated CUDA and HIP guard a runtime amount.  Found by comparing
every interpreted launch with the emulation of its CUDA text (tests/emu_shadow.py): a shift by 32 or 40
gave 5 and -256 there, where the interpreter gives 0."""
from __future__ import annotations

import kernels_interp as K
import pytest
import torch

from tlxc.codegen_amdgcn.emu import run as hip_emu
from tlxc.codegen_nvptx.emu import run as cuda_emu
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.interpreter import interpret

DTYPES = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64, torch.uint8: 8}
BLOCK = 32


def _inputs(dtype):
    bits = DTYPES[dtype]
    values = [1, 5, 3, 7, 100, 1, 2, 9] if dtype == torch.uint8 else [1, -8, 5, -1, -100, 3, 7, -7]
    amounts = [0, 1, bits - 1, bits, bits + 5, 3, 2 * bits - 1, 4]
    if dtype != torch.uint8:
        amounts[5] = -1                            # read as 2^bits - 1
    n = BLOCK // len(values)
    return torch.tensor(values * n, dtype=dtype), torch.tensor(amounts * n, dtype=dtype)


def _reference(a, s, dtype):
    bits, signed = DTYPES[dtype], dtype != torch.uint8
    left, right = [], []
    for x, n in zip(a.tolist(), s.tolist()):
        n %= 2 ** bits
        wrapped = (x << n) % 2 ** bits if n < bits else 0
        if signed and wrapped >= 2 ** (bits - 1):
            wrapped -= 2 ** bits
        left.append(wrapped)
        right.append(x >> n if n < bits else (-1 if signed and x < 0 else 0))
    return left, right


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
@pytest.mark.parametrize("path", ["interpreter", "cuda_emulation", "hip_emulation"])
def test_shifts_past_the_width(dtype, path):
    if path == "cuda_emulation" and not cuda_emu.available() or path == "hip_emulation" and not hip_emu.available():
        pytest.skip("no host C++ compiler")
    a, s = _inputs(dtype)
    left, right = torch.zeros_like(a), torch.zeros_like(a)
    args = {"a_ptr": a, "s_ptr": s, "left_ptr": left, "right_ptr": right, "BLOCK": BLOCK}
    if path == "interpreter":
        interpret(K.shift_kernel, (1,), (a, s, left, right), {"BLOCK": BLOCK})
    elif path == "cuda_emulation":
        h = K.shift_kernel.warmup(a, s, left, right, BLOCK=BLOCK, grid=(1,))
        cuda_emu.build(h.asm["cuda"]).run({k: v for k, v in args.items() if k != "BLOCK"}, grid=(1, 1, 1),
                                          threads=128)
    else:
        spec = specialization_from_args(K.shift_kernel, args)
        compiled = compile_kernel(K.shift_kernel, spec, arch="gfx942", num_warps=4, stages=("hip",))
        info = compiled.metadata
        module = hip_emu.build(compiled.asm["hip"], [info["name"]], arch="gfx942")
        module.run(info["name"], [args[n] for n, _ in spec.runtime_params()], grid=(1, 1, 1),
                   threads=info["threads"], kinds=info["params"])
    want_left, want_right = _reference(a, s, dtype)
    assert left.tolist() == want_left
    assert right.tolist() == want_right


def test_a_literal_amount_below_the_width_is_shifted_unguarded():
    """Constant amounts (hashes, Philox, bit fields) compile to the bare shift."""
    from tlxc.codegen_c.rules_arith import _shift
    from tlxc.ir.types import ScalarType
    i32 = ScalarType("i32")
    assert _shift("<<", i32, "x", "13") == "((int)((unsigned)(x) << 13))"
    assert _shift(">>", i32, "x", "(5)") == "(x >> (5))"
    assert "32u" in _shift(">>", i32, "x", "32") and "32u" in _shift("<<", i32, "x", "n")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
def test_gpu(dtype):
    a, s = (t.cuda() for t in _inputs(dtype))
    left, right = torch.zeros_like(a), torch.zeros_like(a)
    K.shift_kernel[(1,)](a, s, left, right, BLOCK=BLOCK)
    want_left, want_right = _reference(a.cpu(), s.cpu(), dtype)
    assert left.tolist() == want_left and right.tolist() == want_right
