"""Frontend behaviour: Python kernels → IR.

Tests assert on the IR's ops and types rather than on whole printed texts, so
that unrelated printing changes do not break them; one small snapshot (vector
add) pins the text form itself.
"""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

import tlxc
import tlxc.language as tl
from tlxc.frontend.specialize import Specialization, specialization_from_args, specialization_from_types
from tlxc.ir import types as T
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module


def compile_ir(kernel, signature: str, **constexprs):
    compiled = kernel.compile(signature, constexprs, stages=("ir",))
    text = compiled.asm["ir"]
    assert print_module(parse_module(text)) == text, "the IR must print, parse and print back identically"
    return compiled.module, text


def ops_named(module, name: str):
    return [op for op in module.walk() if op.name == name]


def op_names(module) -> list[str]:
    return [op.name for op in module.walk()]


# -- vector add: the one snapshot ------------------------------------------------------------------
@tlxc.kernel
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


VECTOR_ADD_IR = """\
tl.kernel @vector_add(%x_ptr: ptr<f32>, %y_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32) \
{arg_divisibility = [16, 16, 16, 1], num_warps = 4, symbol = "vector_add_BLOCK256"} \
loc("test_frontend.py":{L0}:0) {
  %pid = tl.program_id {axis = 0} : i32 loc("test_frontend.py":{L1}:10)
  %0 = arith.constant {value = 256} : i32 loc("test_frontend.py":{L2}:11)
  %1 = arith.mul %pid, %0 : i32 loc("test_frontend.py":{L2}:11)
  %2 = tl.arange {end = 256, start = 0} : tensor<256xi32> loc("test_frontend.py":{L2}:25)
  %3 = tl.splat %1 : tensor<256xi32> loc("test_frontend.py":{L2}:11)
  %offs = arith.add %3, %2 : tensor<256xi32> loc("test_frontend.py":{L2}:11)
  %4 = tl.splat %n : tensor<256xi32> loc("test_frontend.py":{L3}:11)
  %mask = arith.cmp %offs, %4 {predicate = "lt"} : tensor<256xi1> loc("test_frontend.py":{L3}:11)
  %5 = tl.splat %x_ptr : tensor<256xptr<f32>> loc("test_frontend.py":{L4}:16)
  %6 = tl.addptr %5, %offs : tensor<256xptr<f32>> loc("test_frontend.py":{L4}:16)
  %x = tl.load %6, %mask {has_mask = true, has_other = false} : tensor<256xf32> loc("test_frontend.py":{L4}:8)
  %7 = tl.splat %y_ptr : tensor<256xptr<f32>> loc("test_frontend.py":{L5}:16)
  %8 = tl.addptr %7, %offs : tensor<256xptr<f32>> loc("test_frontend.py":{L5}:16)
  %y = tl.load %8, %mask {has_mask = true, has_other = false} : tensor<256xf32> loc("test_frontend.py":{L5}:8)
  %9 = tl.splat %out_ptr : tensor<256xptr<f32>> loc("test_frontend.py":{L6}:13)
  %10 = tl.addptr %9, %offs : tensor<256xptr<f32>> loc("test_frontend.py":{L6}:13)
  %11 = arith.add %x, %y : tensor<256xf32> loc("test_frontend.py":{L6}:29)
  tl.store %10, %11, %mask {has_mask = true, has_other = false} loc("test_frontend.py":{L6}:4)
  tl.return loc("test_frontend.py":{L0}:0)
}
"""


def test_vector_add_snapshot():
    _, text = compile_ir(vector_add, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", BLOCK=256)
    first = vector_add.source.first_line + 1       # the def line (after the decorator)
    expected = VECTOR_ADD_IR
    for i in range(7):
        expected = expected.replace(f"{{L{i}}}", str(first + i))
    assert text == expected


def test_every_op_carries_the_users_location():
    module, _ = compile_ir(vector_add, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", BLOCK=256)
    for op in module.walk():
        assert op.loc is not None and op.loc.file.endswith("test_frontend.py"), op


# -- type promotion (Triton's table) ---------------------------------------------------------------
@tlxc.kernel
def _promote(a_ptr, b_ptr, OP: tl.constexpr, LITERAL: tl.constexpr, EXPECTED: tl.constexpr):
    offs = tl.arange(0, 16)
    a = tl.load(a_ptr + offs)
    if LITERAL is None:
        b = tl.load(b_ptr + offs)
    else:
        b = LITERAL
    if OP == "+":
        r = a + b
    elif OP == "-":
        r = a - b
    elif OP == "*":
        r = a * b
    elif OP == "/":
        r = a / b
    elif OP == "//":
        r = a // b
    elif OP == "%":
        r = a % b
    elif OP == "&":
        r = a & b
    elif OP == "|":
        r = a | b
    elif OP == "<":
        r = a < b
    else:
        r = tl.where(a > 0, a, b)
    tl.static_assert(r.dtype == EXPECTED, f"{a.dtype} {OP} {LITERAL} gives {r.dtype}, expected {EXPECTED}")


PROMOTIONS = [
    # (a, b: a type or a Python literal, op, result)
    ("i8", 1, "+", T.i8),              # weak int literal keeps the tensor's int type
    ("i8", 1.0, "+", T.f32),           # a float literal does change an int tensor's kind
    ("f16", 1.0, "+", T.f16),          # weak float literal keeps f16
    ("f16", 1, "*", T.f16),
    ("bf16", 2.0, "-", T.bf16),
    ("f16", "f16", "/", T.f32),        # f16 / f16 divides in f32
    ("f16", 2, "%", T.f32),
    ("i32", "i32", "/", T.f32),        # true division of ints gives f32
    ("i32", "i32", "//", T.i32),
    ("i32", 2, "%", T.i32),
    ("u32", "i32", "+", T.u32),        # unsigned wins at equal width
    ("u8", "i32", "+", T.i32),         # the wider signed type wins
    ("i64", "i32", "+", T.i64),
    ("i8", "i16", "*", T.i16),
    ("bf16", "f16", "+", T.f32),       # bf16 with f16 meets in f32
    ("f16", "f32", "*", T.f32),
    ("f32", "f64", "+", T.f64),
    ("i32", "f16", "+", T.f16),        # int with float takes the float
    ("i1", "i1", "&", T.i1),           # bool & bool stays i1
    ("i1", "i1", "|", T.i1),
    ("i32", 1, "&", T.i32),
    ("f32", 1, "<", T.i1),
    ("f16", 0.0, "where", T.f16),
    ("i8", "i32", "where", T.i32),
]


@pytest.mark.parametrize("a, b, op, expected", PROMOTIONS,
                         ids=[f"{a}{op}{b}" for a, b, op, _ in PROMOTIONS])
def test_type_promotion(a, b, op, expected):
    b_type = b if isinstance(b, str) else "i32"
    literal = None if isinstance(b, str) else b
    compile_ir(_promote, f"a_ptr=*{a},b_ptr=*{b_type}", OP=op, LITERAL=literal, EXPECTED=expected)


def test_promotion_inserts_casts_only_where_needed():
    module, _ = compile_ir(_promote, "a_ptr=*f16,b_ptr=*f16", OP="/", LITERAL=None, EXPECTED=T.f32)
    casts = ops_named(module, "arith.cast")
    assert [str(c.result.type) for c in casts] == ["tensor<16xf32>", "tensor<16xf32>"]
    (div,) = ops_named(module, "arith.div")
    assert str(div.result.type) == "tensor<16xf32>"
    module, _ = compile_ir(_promote, "a_ptr=*f16,b_ptr=*i32", OP="+", LITERAL=1.0, EXPECTED=T.f16)
    assert not ops_named(module, "arith.cast")
    (const,) = [c for c in ops_named(module, "arith.constant") if c.result.type == T.f16]
    assert const.attrs["value"] == 1.0          # the literal becomes an f16 constant, then a splat


# -- shapes ------------------------------------------------------------------------------------------
@tlxc.kernel
def _outer(x_ptr, y_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows)
    y = tl.load(y_ptr + cols)
    prod = x[:, None] * y[None, :]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], prod)
    total = tl.sum(prod, axis=1)
    tl.store(out_ptr + rows, total + tl.max(prod, axis=0, keep_dims=True).sum())


def test_broadcasting_and_expand_dims():
    module, _ = compile_ir(_outer, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32", M=16, N=32)
    expands = ops_named(module, "tl.expand_dims")
    assert {(str(op.operands[0].type), op.attrs["axis"], str(op.result.type)) for op in expands} >= {
        ("tensor<16xf32>", 1, "tensor<16x1xf32>"), ("tensor<32xf32>", 0, "tensor<1x32xf32>")}
    broadcasts = {str(op.result.type) for op in ops_named(module, "tl.broadcast")}
    assert "tensor<16x32xf32>" in broadcasts
    (mul,) = [op for op in ops_named(module, "arith.mul") if op.result.type.element == T.f32]
    assert str(mul.result.type) == "tensor<16x32xf32>"
    reduces = ops_named(module, "tl.reduce")
    assert [(op.attrs["kind"], op.attrs["axis"], str(op.result.type)) for op in reduces] == [
        ("sum", 1, "tensor<16xf32>"), ("max", 0, "tensor<32xf32>"), ("sum", 0, "f32")]


@tlxc.kernel
def _shapes(x_ptr, out_ptr):
    v = tl.load(x_ptr + tl.arange(0, 64))
    w = tl.reshape(v, (8, 8))
    t = tl.trans(w)
    u = w.T + t
    z = tl.expand_dims(tl.sum(u, axis=0), 0)
    tl.store(out_ptr + tl.arange(0, 8)[None, :], z)


def test_reshape_trans_expand_dims():
    module, _ = compile_ir(_shapes, "x_ptr=*fp32,out_ptr=*fp32")
    assert [str(op.result.type) for op in ops_named(module, "tl.reshape")] == ["tensor<8x8xf32>"]
    assert [op.attrs["perm"] for op in ops_named(module, "tl.trans")] == [(1, 0), (1, 0)]
    assert "tensor<1x8xf32>" in {str(op.result.type) for op in ops_named(module, "tl.expand_dims")}


# -- control flow -------------------------------------------------------------------------------------
@tlxc.kernel
def _static_unroll(x_ptr, out_ptr, STEPS: tl.constexpr):
    acc = tl.zeros((16,), dtype=tl.float32)
    for i in tl.static_range(STEPS):
        acc += tl.load(x_ptr + i * 16 + tl.arange(0, 16))
    tl.store(out_ptr + tl.arange(0, 16), acc)


def test_static_range_unrolls():
    module, _ = compile_ir(_static_unroll, "x_ptr=*fp32,out_ptr=*fp32", STEPS=4)
    assert "scf.for" not in op_names(module)
    assert len(ops_named(module, "tl.load")) == 4
    offsets = sorted(op.attrs["value"] for op in ops_named(module, "arith.constant")
                     if op.result.type == T.i32)
    assert offsets == [0, 16, 32, 48]       # i * 16 folded at compile time


@tlxc.kernel
def _constexpr_if(x_ptr, USE_EXP: tl.constexpr, SCALE: tl.constexpr = 2.0):
    v = tl.load(x_ptr)
    if USE_EXP:
        v = tl.exp(v)
    elif SCALE != 1.0:
        v = v * SCALE
    tl.store(x_ptr, v)


def test_constexpr_if_folds():
    module, _ = compile_ir(_constexpr_if, "x_ptr=*fp32", USE_EXP=True)
    names = op_names(module)
    assert "scf.if" not in names and "math.exp" in names and "arith.mul" not in names
    module, _ = compile_ir(_constexpr_if, "x_ptr=*fp32", USE_EXP=False)
    names = op_names(module)
    assert "scf.if" not in names and "math.exp" not in names and "arith.mul" in names
    module, _ = compile_ir(_constexpr_if, "x_ptr=*fp32", USE_EXP=False, SCALE=1.0)
    assert "arith.mul" not in op_names(module)


@tlxc.kernel
def _runtime_if(x_ptr, n):
    v = tl.load(x_ptr)
    if n > 0:
        scale = 2.0
        v = v + 1.0
    else:
        scale = 0.5
    tl.store(x_ptr, v * scale)


def test_runtime_if_yields_the_values_it_changes():
    module, _ = compile_ir(_runtime_if, "x_ptr=*fp32,n=i32")
    (if_op,) = ops_named(module, "scf.if")
    assert [str(r.type) for r in if_op.results] == ["f32", "f32"]
    assert [r.name_hint for r in if_op.results] == ["scale", "v"]
    then_yield, else_yield = (region.ops[-1] for region in if_op.regions)
    assert then_yield.name == else_yield.name == "scf.yield"
    assert len(then_yield.operands) == len(else_yield.operands) == 2
    assert str(if_op.operands[0].type) == "i1"


@tlxc.kernel
def _early_return(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


def test_early_return_at_top_level():
    module, _ = compile_ir(_early_return, "x_ptr=*fp32,n=i32", BLOCK=64)
    (if_op,) = ops_named(module, "scf.if")
    then_ops = [op.name for op in if_op.regions[0].ops]
    else_ops = [op.name for op in if_op.regions[1].ops]
    assert then_ops == ["scf.yield"]              # the early exit does nothing
    assert "tl.store" in else_ops                 # the rest of the kernel runs otherwise
    kernel_ops = [op.name for op in module.kernels[0].regions[0].ops]
    assert kernel_ops[-2:] == ["scf.if", "tl.return"]


@tlxc.kernel
def _loops(x_ptr, n):
    acc = tl.zeros((16,), dtype=tl.float32)
    for i in range(0, n, 16):
        acc += tl.load(x_ptr + i + tl.arange(0, 16))
    count = 0
    total = 0.0
    while count < n:
        total = total + tl.load(x_ptr + count)
        count += 1
    tl.store(x_ptr + tl.arange(0, 16), acc + total)


def test_for_and_while_loops_carry_values():
    module, _ = compile_ir(_loops, "x_ptr=*fp32,n=i32")
    (for_op,) = ops_named(module, "scf.for")
    assert [str(r.type) for r in for_op.results] == ["tensor<16xf32>"]
    assert [str(a.type) for a in for_op.regions[0].args] == ["i32", "tensor<16xf32>"]
    (while_op,) = ops_named(module, "scf.while")
    assert sorted(str(r.type) for r in while_op.results) == ["f32", "i32"]
    before, after = while_op.regions
    assert before.ops[-1].name == "scf.condition"
    assert after.ops[-1].name == "scf.yield"


def test_loop_with_64_bit_bounds():
    module, _ = compile_ir(_loops, "x_ptr=*fp32,n=i64")
    (for_op,) = ops_named(module, "scf.for")
    assert str(for_op.operands[0].type) == "i64"


# -- helpers -------------------------------------------------------------------------------------------
@tlxc.kernel
def _min_max(a, b):
    return tl.minimum(a, b), tl.maximum(a, b)


@tlxc.kernel
def _scaled(v, factor: tl.constexpr = 3):
    return v * factor


@tlxc.kernel
def _uses_helpers(x_ptr, out_ptr):
    offs = tl.arange(0, 32)
    a = tl.load(x_ptr + offs)
    lo, hi = _min_max(a, 0.0)
    both = _min_max(lo, hi)
    tl.store(out_ptr + offs, _scaled(both[1]) + _scaled(lo, factor=5))


def test_helpers_are_inlined_and_return_tuples():
    module, _ = compile_ir(_uses_helpers, "x_ptr=*fp32,out_ptr=*fp32")
    names = op_names(module)
    assert names.count("arith.min") == 2 and names.count("arith.max") == 2
    factors = sorted(op.attrs["value"] for op in ops_named(module, "arith.constant")
                     if op.attrs["value"] in (3, 5, 3.0, 5.0))
    assert factors == [3.0, 5.0]
    helper_lines = {op.loc.line for op in ops_named(module, "arith.min")}
    assert helper_lines == {_min_max.source.first_line + 2}, "helper ops keep the helper's location"


# -- specialization ----------------------------------------------------------------------------------
@tlxc.kernel
def _defaults(x_ptr, BLOCK: tl.constexpr = 128, ACT: tl.constexpr = "none"):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    if ACT == "relu":
        v = tl.maximum(v, 0.0)
    tl.store(x_ptr + offs, v)


def test_constexpr_defaults():
    module, _ = compile_ir(_defaults, "x_ptr=*fp32")
    (arange,) = ops_named(module, "tl.arange")
    assert arange.attrs["end"] == 128
    assert "arith.max" not in op_names(module)
    module, _ = compile_ir(_defaults, "x_ptr=*fp32", BLOCK=64, ACT="relu")
    assert ops_named(module, "tl.arange")[0].attrs["end"] == 64
    assert "arith.max" in op_names(module)
    # constexpr parameters are folded away: only x_ptr is a kernel argument
    assert [str(a.type) for a in module.kernels[0].regions[0].args] == ["ptr<f32>"]


class _FakeTensor:
    """Enough of a torch tensor for specialization: a dtype and a data pointer."""

    def __init__(self, dtype: str, address: int):
        self.dtype = f"torch.{dtype}"
        self.address = address

    def data_ptr(self) -> int:
        return self.address


@tlxc.kernel(do_not_specialize=["m"])
def _specialized(x_ptr, n, m, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), (n + m).to(tl.float32))


def _spec_of(**arguments) -> Specialization:
    return specialization_from_args(_specialized, arguments)


def test_specialization_from_launch_arguments():
    spec = _spec_of(x_ptr=_FakeTensor("float16", 4096), n=64, m=64, BLOCK=32)
    assert spec.params == {"x_ptr": ("runtime", T.PointerType(T.f16)), "n": ("runtime", T.i32),
                           "m": ("runtime", T.i32), "BLOCK": ("constexpr", 32)}
    assert spec.divisibility == {"x_ptr": 16, "n": 16}   # m is do_not_specialize
    one = _spec_of(x_ptr=_FakeTensor("float16", 4096), n=1, m=1, BLOCK=32)
    assert one.params["n"] == ("constexpr", 1)           # an int equal to 1 folds in ...
    assert one.params["m"] == ("runtime", T.i32)         # ... unless do_not_specialize
    big = _spec_of(x_ptr=_FakeTensor("float16", 4100), n=2**40, m=None, BLOCK=32)
    assert big.params["n"] == ("runtime", T.i64) and big.params["m"] == ("constexpr", None)
    assert "x_ptr" not in big.divisibility


def test_specialization_keys_differ_by_what_changes_the_code():
    base = {"x_ptr": _FakeTensor("float16", 4096), "n": 64, "m": 3, "BLOCK": 32}
    key = _spec_of(**base).key()
    assert _spec_of(**base).key() == key
    assert _spec_of(**{**base, "m": 5}).key() == key                                  # runtime value
    assert _spec_of(**{**base, "x_ptr": _FakeTensor("float16", 8192)}).key() == key  # same facts
    different = [
        {**base, "x_ptr": _FakeTensor("bfloat16", 4096)},     # dtype
        {**base, "BLOCK": 64},                                 # constexpr value
        {**base, "n": 65},                                     # divisibility by 16
        {**base, "x_ptr": _FakeTensor("float16", 4104)},     # pointer alignment
        {**base, "n": 1},                                      # == 1
        {**base, "n": 2**33},                                  # int width
    ]
    keys = {_spec_of(**args).key() for args in different}
    assert key not in keys and len(keys) == len(different)


def test_specialized_one_folds_into_the_ir():
    spec = _spec_of(x_ptr=_FakeTensor("float32", 4096), n=1, m=7, BLOCK=16)
    module = tlxc.compiler.frontend(_specialized, spec)
    assert [str(a.type) for a in module.kernels[0].regions[0].args] == ["ptr<f32>", "i32"]
    assert module.kernels[0].attrs["arg_divisibility"] == (16, 1)


def test_specialization_from_types_matches_annotations():
    spec = specialization_from_types(_specialized, {"x_ptr": T.PointerType(T.bf16), "n": T.i32,
                                                    "m": T.i64}, {"BLOCK": tl.constexpr(8)})
    assert spec.params["BLOCK"] == ("constexpr", 8)
    assert spec.params["m"] == ("runtime", T.i64)


# -- the cache key covers every helper's source -------------------------------------------------------
_MODULE = textwrap.dedent("""
    import tlxc
    import tlxc.language as tl

    SCALE = {scale}

    @tlxc.kernel
    def helper(x):
        return x * {factor}

    @tlxc.kernel
    def entry(x_ptr):
        tl.store(x_ptr, helper(tl.load(x_ptr)) + SCALE)
""")


def _load_module(tmp_path: Path, name: str, **values):
    tmp_path.mkdir()
    path = tmp_path / f"{name}.py"
    path.write_text(_MODULE.format(**values))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_cache_key_changes_with_a_helpers_source(tmp_path):
    a = _load_module(tmp_path / "a", "kmod", factor=2, scale=1)
    same = _load_module(tmp_path / "same", "kmod", factor=2, scale=1)
    other_helper = _load_module(tmp_path / "b", "kmod", factor=3, scale=1)
    other_global = _load_module(tmp_path / "c", "kmod", factor=2, scale=7)
    assert a.entry.cache_key == same.entry.cache_key                 # deterministic
    assert a.entry.src == other_helper.entry.src                     # the kernel itself is identical
    assert a.entry.cache_key != other_helper.entry.cache_key         # ... but its helper is not
    assert a.entry.cache_key != other_global.entry.cache_key         # a global constant it reads changed
    assert a.helper.cache_key != other_helper.helper.cache_key


# -- odds and ends -----------------------------------------------------------------------------------
@tlxc.kernel
def _misc(x_ptr: tl.pointer_type(tl.float16), n: tl.int32):
    offs = tl.arange(0, 16)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    w = tl.where(v > 0, v, -v).to(tl.float32)
    w = tl.fma(w, 2.0, 1.0) + tl.sigmoid(w) + tl.sqrt(tl.abs(w))
    tl.atomic_add(x_ptr + offs, w.to(tl.float16), mask=offs < n)
    tl.device_assert(n > 0, "n must be positive")
    tl.device_print("w", w)
    tl.store(x_ptr + offs, tl.cdiv(n, 16).to(tl.float16))


def test_annotations_give_types_and_ops_are_present():
    module, _ = compile_ir(_misc, None)
    names = set(op_names(module))
    assert {"tl.load", "arith.select", "math.fma", "math.exp", "math.sqrt", "arith.abs", "tl.atomic_rmw",
            "tl.assert", "tl.print", "tl.store"} <= names
    (load,) = ops_named(module, "tl.load")
    assert load.attrs == {"has_mask": True, "has_other": True}
    assert [str(a.type) for a in module.kernels[0].regions[0].args] == ["ptr<f16>", "i32"]
