"""The IR: text round trip, parser diagnostics, verifier rules.

* Every module the frontend (and the pass pipeline) produces prints, parses
  back to the same structure, and prints to the same text.
* Malformed text gives an ``IRParseError`` naming the line and column.
* Hand-built malformed ops give a ``VerificationError`` whose message is a
  sentence ("'tl.dot' op expected a's K (32) to equal b's K (16)"), never a
  Python exception from inside the verifier.
"""
from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

from tlxc.compiler import copy_module, frontend, optimize
from tlxc.errors import Location, VerificationError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.ir import ops  # noqa: F401  (registers every op)
from tlxc.ir import types as T
from tlxc.ir.builder import Builder
from tlxc.ir.core import OP_REGISTRY, Block, Module, Operation, Region
from tlxc.ir.parser import IRParseError, parse_module
from tlxc.ir.printer import print_module
from tlxc.ir.verifier import verify_module

sys.path.insert(0, str(Path(__file__).parent))
import test_frontend as F

F32, I32, I1 = T.f32, T.i32, T.i1
PF32 = T.PointerType(T.f32)


def tensor(*shape, element=T.f32):
    return T.TensorType(tuple(shape), element)


# -- round trip ---------------------------------------------------------------------------------------
KERNELS = [
    (F.vector_add, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 1024}),
    (F._outer, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32", {"M": 16, "N": 32}),
    (F._shapes, "x_ptr=*fp32,out_ptr=*fp32", {}),
    (F._static_unroll, "x_ptr=*fp32,out_ptr=*fp32", {"STEPS": 3}),
    (F._constexpr_if, "x_ptr=*bf16", {"USE_EXP": True}),
    (F._runtime_if, "x_ptr=*fp32,n=i32", {}),
    (F._early_return, "x_ptr=*fp16,n=i32", {"BLOCK": 128}),
    (F._loops, "x_ptr=*fp32,n=i64", {}),
    (F._uses_helpers, "x_ptr=*fp32,out_ptr=*fp32", {}),
    (F._defaults, "x_ptr=*fp32", {"ACT": "relu"}),
    (F._misc, "", {}),
    (F._promote, "a_ptr=*i8,b_ptr=*i32", {"OP": "//", "LITERAL": None, "EXPECTED": T.i32}),
]


def frontend_module(kernel, signature: str, constexprs: dict) -> Module:
    spec = specialization_from_types(kernel, parse_signature(signature), constexprs)
    return frontend(kernel, spec)


def assert_same_structure(a: Module, b: Module) -> None:
    """Op by op: names, attributes, types, value wiring, regions (locations by file name and line)."""
    assert len(a.kernels) == len(b.kernels)
    numbering_a: dict[int, int] = {}
    numbering_b: dict[int, int] = {}

    def number(numbering, value):
        return numbering.setdefault(id(value), len(numbering))

    def same_op(x: Operation, y: Operation):
        assert (x.name, len(x.operands), len(x.results), len(x.regions)) == \
               (y.name, len(y.operands), len(y.results), len(y.regions)), (x, y)
        assert _attrs_key(x.attrs) == _attrs_key(y.attrs), (x, y)
        assert [number(numbering_a, v) for v in x.operands] == [number(numbering_b, v) for v in y.operands]
        assert [str(r.type) for r in x.results] == [str(r.type) for r in y.results]
        assert [r.type for r in x.results] == [r.type for r in y.results]
        for r, s in zip(x.results, y.results):
            assert number(numbering_a, r) == number(numbering_b, s)
        if x.loc is not None or y.loc is not None:
            assert (Path(x.loc.file).name, x.loc.line, x.loc.col) == (Path(y.loc.file).name, y.loc.line, y.loc.col)
        for rx, ry in zip(x.regions, y.regions):
            assert [arg.type for arg in rx.args] == [arg.type for arg in ry.args]
            for p, q in zip(rx.args, ry.args):
                assert number(numbering_a, p) == number(numbering_b, q)
            assert len(rx.ops) == len(ry.ops)
            for p, q in zip(rx.ops, ry.ops):
                same_op(p, q)

    for x, y in zip(a.kernels, b.kernels):
        same_op(x, y)


def _attrs_key(attrs: dict):
    def norm(v):
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, (list, tuple)):
            return tuple(norm(e) for e in v)
        return (type(v).__name__, v)
    return sorted((k, norm(v)) for k, v in attrs.items())


@pytest.mark.parametrize("kernel, signature, constexprs", KERNELS, ids=[k.__name__ for k, _, _ in KERNELS])
def test_frontend_ir_round_trips(kernel, signature, constexprs):
    module = frontend_module(kernel, signature, constexprs)
    text = print_module(module)
    parsed = parse_module(text)
    verify_module(parsed)
    assert_same_structure(module, parsed)
    assert print_module(parsed) == text
    assert print_module(module) == text, "printing is deterministic"


@pytest.mark.parametrize("kernel, signature, constexprs", KERNELS[:4] + KERNELS[7:9],
                         ids=[k.__name__ for k, _, _ in KERNELS[:4] + KERNELS[7:9]])
def test_optimized_ir_with_layouts_round_trips(kernel, signature, constexprs):
    module = optimize(copy_module(frontend_module(kernel, signature, constexprs)), "sm_90a", 4)
    text = print_module(module)
    assert "#L0 = " in text                      # layouts print once, as aliases
    parsed = parse_module(text)
    assert_same_structure(module, parsed)
    assert print_module(parsed) == text


HAND_WRITTEN = """\
tl.kernel @everything(%p: ptr<f32>, %q: ptr<i8>, %n: i64, %flag: i1) {num_warps = 8, tag = "a \\"quoted\\" \\\\ name\\n"} {
  %c = arith.constant {value = -0.0} : f32
  %big = arith.constant {value = 9223372036854775807} : i64
  %inf = arith.constant {value = -inf} : tensor<4x8xf32>
  %nan = arith.constant {value = nan} : f32
  %tiny = arith.constant {value = 1e-30} : f64
  %r = tl.arange {end = 8, start = 0} : tensor<8xi32>
  %e = tl.expand_dims %r {axis = 0} : tensor<1x8xi32>
  %b = tl.broadcast %e : tensor<4x8xi32>
  %s = tl.splat %p : tensor<4x8xptr<f32>>
  %a = tl.addptr %s, %b : tensor<4x8xptr<f32>>
  %v = tl.load %a {has_mask = false, has_other = false, cache = ".cg"} : tensor<4x8xf32>
  %w = tl.hint %v {multiple_of = [16, 1], note = none, dtype = !ptr<bf16>, empty = []} : tensor<4x8xf32>
  %lb = arith.constant {value = 0} : i64
  %one = arith.constant {value = 1} : i64
  %acc, %k = scf.for %lb, %n, %one, %w, %lb : tensor<4x8xf32>, i64 {
  ^(%i: i64, %acc_in: tensor<4x8xf32>, %k_in: i64):
    %next = arith.add %acc_in, %inf : tensor<4x8xf32>
    %k_next = arith.add %k_in, %i : i64
    scf.yield %next, %k_next
  }
  %m = scf.while %lb : i64 {
  ^(%x: i64):
    %go = arith.cmp %x, %n {predicate = "lt"} : i1
    scf.condition %go, %x
  } {
  ^(%y: i64):
    %y1 = arith.add %y, %one : i64
    scf.yield %y1
  }
  %t = scf.if %flag : tensor<4x8xf32> {
    scf.yield %acc
  } {
    %z = math.exp %acc : tensor<4x8xf32>
    scf.yield %z
  }
  %sum = tl.reduce %t {axis = 1, kind = "sum"} : tensor<4xf32>
  %tt = tl.trans %t {perm = [1, 0]} : tensor<8x4xf32>
  tl.store %a, %t {has_mask = false, has_other = false}
  tl.print %sum {hex = false, prefix = "sum="}
  tl.return
}
"""


def test_hand_written_ir_round_trips():
    module = parse_module(HAND_WRITTEN)
    verify_module(module)
    text = print_module(module)
    again = parse_module(text)
    assert_same_structure(module, again)
    assert print_module(again) == text
    kernel = module.kernels[0]
    assert kernel.attrs["tag"] == 'a "quoted" \\ name\n'
    consts = {op.results[0].name_hint: op.attrs["value"] for op in module.walk() if op.name == "arith.constant"}
    assert math.copysign(1.0, consts["c"]) == -1.0
    assert consts["big"] == 2**63 - 1 and consts["inf"] == -math.inf and math.isnan(consts["nan"])
    assert consts["tiny"] == 1e-30
    hint = next(op for op in module.walk() if op.name == "tl.hint")
    assert hint.attrs == {"multiple_of": (16, 1), "note": None, "dtype": T.PointerType(T.bf16), "empty": ()}


def test_ops_without_locations_or_attributes_round_trip():
    """A region right after an op's operands must not be mistaken for its attributes."""
    def fill(b, args):
        b.loc = None
        b.create("scf.if", [args[2]], [], {}, [_region([]), _region([])])
        b.create("scf.if", [args[2]], [], {}, [_region([], lambda ib, _: []), _region([])])
    module = build_kernel(fill)
    module.kernels[0].attrs = {"sym_name": "k"}          # no attributes on the kernel either
    text = print_module(module)
    assert "tl.kernel @k(%a0: ptr<f32>, %a1: i32, %a2: i1) {\n" in text
    assert "  scf.if %a2 {\n" in text
    parsed = parse_module(text)
    verify_module(parsed)
    assert_same_structure(module, parsed)
    assert print_module(parsed) == text


def test_printer_invents_unique_names():
    module = parse_module(HAND_WRITTEN)
    for op in module.walk():
        for r in op.results:
            r.name_hint = "x"                    # every value wants the same name
    text = print_module(module)
    assert "%x_1 = " in text and "%x_2 = " in text
    assert print_module(parse_module(text)) == text


def test_locations_print_and_parse():
    module = frontend_module(*KERNELS[0])
    text = print_module(module)
    assert 'loc("test_frontend.py":' in text
    parsed = parse_module(text)
    for op in parsed.walk():
        assert op.loc is not None and op.loc.file == "test_frontend.py" and op.loc.line > 0


# -- parser diagnostics ---------------------------------------------------------------------------------
PARSE_ERRORS = [
    ("tl.kernel @k() {\n  %x = arith.frobnicate : i32\n  tl.return\n}\n", 2, "unknown op 'arith.frobnicate'"),
    ("tl.kernel @k() {\n  %x = arith.add %a, %a : i32\n  tl.return\n}\n", 2, "use of undefined value %a"),
    ("tl.kernel @k() {\n  %x = arith.constant {value = 1} : i33\n  tl.return\n}\n", 2, "unknown type 'i33'"),
    ("tl.kernel @k() {\n  %x, %y = arith.constant {value = 1} : i32\n  tl.return\n}\n", 2,
     "2 results but 1 result types"),
    ("tl.kernel @k() {\n  %x = arith.constant {value = 1} : i32\n  %x = arith.constant {value = 2} : i32\n}\n",
     3, "value %x defined twice"),
    ("tl.kernel @k() {\n  %x = arith.constant {value = 1} : i32\n", 3, "unexpected end of input inside a region"),
    ("tl.kernel @k(%p ptr<f32>) {\n  tl.return\n}\n", 1, "expected ':'"),
    ("tl.kernel @k() {\n  %x = arith.constant {value = 1 : i32\n  tl.return\n}\n", 2, "expected ','"),
    ("tl.kernel @k() {\n  %x = arith.constant {value = 1} : tensor<4xf32, #L9>\n  tl.return\n}\n", 2,
     "undefined layout #L9"),
]


@pytest.mark.parametrize("text, line, message", PARSE_ERRORS, ids=[m for _, _, m in PARSE_ERRORS])
def test_parse_errors_name_the_position(text, line, message):
    with pytest.raises(IRParseError) as info:
        parse_module(text, "bad.ir")
    err = info.value
    assert message in err.message
    assert err.loc.file == "bad.ir" and err.loc.line == line
    assert str(err).startswith(f"bad.ir:{line}:{err.loc.col}: error: ")


def test_values_are_scoped_to_their_region():
    text = ("tl.kernel @k(%c: i1) {\n  scf.if %c {\n    %x = arith.constant {value = 1} : i32\n"
            "    scf.yield\n  } {\n    scf.yield\n  }\n  %y = arith.add %x, %x : i32\n  tl.return\n}\n")
    with pytest.raises(IRParseError, match="use of undefined value %x"):
        parse_module(text)


# -- verifier ---------------------------------------------------------------------------------------------
def build_kernel(fill, arg_types=(PF32, I32, I1)) -> Module:
    """A kernel whose body ``fill(builder, args)`` writes, closed with tl.return."""
    body = Block(list(arg_types), [f"a{i}" for i in range(len(arg_types))])
    kernel = Builder().create("tl.kernel", [], [], {"sym_name": "k", "num_warps": 4}, [Region(body)])
    b = Builder(body)
    b.loc = Location("bad.py", 7, 4)
    fill(b, body.args)
    b.create("tl.return")
    return Module([kernel])


def c(b, value, type_):
    return b.value("arith.constant", [], type_, value=value)


def arange(b, n=16):
    return b.value("tl.arange", [], tensor(n, element=I32), start=0, end=n)


def _region(types, yields_fn=None, arg_types=()):
    block = Block(list(arg_types))
    inner = Builder(block)
    values = yields_fn(inner, block.args) if yields_fn else []
    inner.create("scf.yield", values)
    return Region(block)


VERIFIER_CASES = {
    "binary operand types differ": (
        lambda b, a: b.value("arith.add", [c(b, 1.0, F32), c(b, 1, I32)], F32),
        "'arith.add' op expected rhs of type f32, got i32"),
    "bitwise op on floats": (
        lambda b, a: b.value("arith.and", [c(b, 1.0, F32), c(b, 1.0, F32)], F32),
        "'arith.and' op expected operands with integer elements, got f32"),
    "binary result type": (
        lambda b, a: b.value("arith.mul", [c(b, 1, I32), c(b, 1, I32)], F32),
        "'arith.mul' op expected result of type i32, got f32"),
    "comparison predicate": (
        lambda b, a: b.value("arith.cmp", [c(b, 1, I32), c(b, 1, I32)], I1, predicate="approx"),
        "'arith.cmp' op expected predicate in"),
    "comparison result": (
        lambda b, a: b.value("arith.cmp", [c(b, 1, I32), c(b, 1, I32)], I32, predicate="lt"),
        "'arith.cmp' op expected result of type i1, got i32"),
    "select condition": (
        lambda b, a: b.value("arith.select", [c(b, 1, I32), c(b, 1.0, F32), c(b, 2.0, F32)], F32),
        "'arith.select' op expected condition of type i1, got i32"),
    "math on integers": (
        lambda b, a: b.value("math.exp", [c(b, 1, I32)], I32),
        "'math.exp' op expected operand with floating-point elements, got i32"),
    "cast changes shape": (
        lambda b, a: b.value("arith.cast", [arange(b)], tensor(8)),
        "'arith.cast' op expected source and result to have the same shape"),
    "bitcast width": (
        lambda b, a: b.value("arith.bitcast", [c(b, 1, I32)], T.f16),
        "'arith.bitcast' op expected equal bit widths, got i32 (32 bits) and f16 (16 bits)"),
    "constant value": (
        lambda b, a: b.value("arith.constant", [], I32, value="seven"),
        "'arith.constant' op expected an int/float/bool 'value' attribute, got 'seven'"),
    "program_id axis": (
        lambda b, a: b.value("tl.program_id", [], I32, axis=3),
        "'tl.program_id' op expected axis 0, 1 or 2, got 3"),
    "arange result": (
        lambda b, a: b.value("tl.arange", [], tensor(8, element=I32), start=0, end=16),
        "'tl.arange' op expected tensor<16xi32>, got tensor<8xi32>"),
    "arange attributes": (
        lambda b, a: b.value("tl.arange", [], tensor(8, element=I32)),
        "'tl.arange' op expected integer attributes start < end, got start=None, end=None"),
    "splat element": (
        lambda b, a: b.value("tl.splat", [c(b, 1, I32)], tensor(16)),
        "'tl.splat' op expected scalar operand of type f32, got i32"),
    "broadcast shape": (
        lambda b, a: b.value("tl.broadcast", [arange(b)], tensor(32, element=I32)),
        "'tl.broadcast' op cannot broadcast tensor<16xi32> to tensor<32xi32>"),
    "expand_dims axis": (
        lambda b, a: b.value("tl.expand_dims", [arange(b)], tensor(16, 1, element=I32), axis=4),
        "'tl.expand_dims' op expected axis in [0, 1], got 4"),
    "reshape element count": (
        lambda b, a: b.value("tl.reshape", [arange(b)], tensor(4, 8, element=I32)),
        "'tl.reshape' op cannot reshape tensor<16xi32> (16 elements) to tensor<4x8xi32>"),
    "trans permutation": (
        lambda b, a: b.value("tl.trans", [b.value("tl.splat", [c(b, 1.0, F32)], tensor(4, 8))], tensor(8, 4),
                             perm=(0, 0)),
        "'tl.trans' op expected a permutation of [0, 1], got [0, 0]"),
    "reduce axis": (
        lambda b, a: b.value("tl.reduce", [arange(b)], I32, axis=1, kind="sum"),
        "'tl.reduce' op expected axis in [0, 1), got 1"),
    "reduce kind": (
        lambda b, a: b.value("tl.reduce", [arange(b)], I32, axis=0, kind="mean"),
        "'tl.reduce' op expected kind in"),
    "argmax result element": (
        lambda b, a: b.value("tl.reduce", [b.value("tl.splat", [c(b, 1.0, F32)], tensor(16))], F32,
                             axis=0, kind="argmax"),
        "'tl.reduce' op expected result of shape () and element i32, got f32"),
    "addptr with a float offset": (
        lambda b, a: b.value("tl.addptr", [a[0], c(b, 1.0, F32)], PF32),
        "'tl.addptr' op expected offset with integer elements, got f32"),
    "load from a non-pointer": (
        lambda b, a: b.value("tl.load", [a[1]], I32, has_mask=False, has_other=False),
        "'tl.load' op expected pointer to be a pointer or tensor of pointers, got i32"),
    "load mask shape": (
        lambda b, a: b.value("tl.load", [b.value("tl.splat", [a[0]], tensor(16, element=PF32)),
                                         b.value("tl.splat", [a[2]], tensor(8, element=I1))],
                             tensor(16), has_mask=True, has_other=False),
        "'tl.load' op expected mask of type tensor<16xi1>, got tensor<8xi1>"),
    "load operands vs flags": (
        lambda b, a: b.value("tl.load", [a[0], a[2]], F32, has_mask=False, has_other=False),
        "'tl.load' op expected 1 operands (has_mask/has_other), got 2"),
    "load other without mask": (
        lambda b, a: b.value("tl.load", [a[0], c(b, 0.0, F32)], F32, has_mask=False, has_other=True),
        "'tl.load' op expected a mask with 'other'"),
    "load result": (
        lambda b, a: b.value("tl.load", [a[0]], T.f16, has_mask=False, has_other=False),
        "'tl.load' op expected result of type f32, got f16"),
    "store value type": (
        lambda b, a: b.create("tl.store", [a[0], c(b, 1, I32)], [], {"has_mask": False, "has_other": False}),
        "'tl.store' op expected value of type f32, got i32"),
    "atomic kind": (
        lambda b, a: b.value("tl.atomic_rmw", [a[0], c(b, 1.0, F32)], F32, kind="nand", has_mask=False,
                             has_other=False),
        "'tl.atomic_rmw' op expected kind in"),
    "dot inner dimension": (
        lambda b, a: b.value("tl.dot", [b.value("tl.splat", [c(b, 1.0, T.f16)], tensor(16, 32, element=T.f16)),
                                        b.value("tl.splat", [c(b, 1.0, T.f16)], tensor(16, 16, element=T.f16)),
                                        b.value("tl.splat", [c(b, 0.0, F32)], tensor(16, 16))],
                             tensor(16, 16), input_precision="ieee"),
        "'tl.dot' op expected a's K (32) to equal b's K (16)"),
    "dot accumulator shape": (
        lambda b, a: b.value("tl.dot", [b.value("tl.splat", [c(b, 1.0, T.f16)], tensor(16, 16, element=T.f16)),
                                        b.value("tl.splat", [c(b, 1.0, T.f16)], tensor(16, 32, element=T.f16)),
                                        b.value("tl.splat", [c(b, 0.0, F32)], tensor(16, 16))],
                             tensor(16, 16), input_precision="ieee"),
        "'tl.dot' op expected acc of shape (16, 32), got (16, 16)"),
    "assert condition": (
        lambda b, a: b.create("tl.assert", [c(b, 1, I32)], [], {"message": "m"}),
        "'tl.assert' op expected one i1 (tensor) condition"),
    "if condition": (
        lambda b, a: b.create("scf.if", [a[1]], [], {}, [_region([]), _region([])]),
        "'scf.if' op expected one i1 condition, got ['i32']"),
    "if yields": (
        lambda b, a: b.create("scf.if", [a[2]], [F32], {}, [_region([], lambda ib, _: [c(ib, 1, I32)]),
                                                          _region([], lambda ib, _: [c(ib, 1.0, F32)])]),
        "'scf.if' op expected the then region to yield (f32), got (i32)"),
    "for bounds": (
        lambda b, a: b.create("scf.for", [c(b, 0, I32), c(b, 4, T.i64), c(b, 1, I32)], [], {},
                              [_region([], arg_types=[I32])]),
        "'scf.for' op expected upper bound of type i32, got i64"),
    "for region arguments": (
        lambda b, a: b.create("scf.for", [c(b, 0, I32), a[1], c(b, 1, I32), c(b, 0.0, F32)], [F32], {},
                              [_region([], lambda ib, args: [args[1]], arg_types=[I32, I32])]),
        "'scf.for' op expected region args (i32, f32), got (i32, i32)"),
    "for yields": (
        lambda b, a: b.create("scf.for", [c(b, 0, I32), a[1], c(b, 1, I32), c(b, 0.0, F32)], [F32], {},
                              [_region([], lambda ib, args: [args[0]], arg_types=[I32, F32])]),
        "'scf.for' op expected the body region to yield (f32), got (i32)"),
}


@pytest.mark.parametrize("case", list(VERIFIER_CASES), ids=list(VERIFIER_CASES))
def test_verifier_rejects_with_a_sentence(case):
    fill, message = VERIFIER_CASES[case]
    module = build_kernel(lambda b, args: fill(b, args))
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    err = info.value
    assert message in err.message, err.message
    assert err.message.split(" op ", 1)[1].startswith(("expected", "cannot")), err.message
    assert str(err).startswith("bad.py:7:4: error: '")      # the op's location is reported


def test_verifier_accepts_the_well_formed_kernels():
    for kernel, signature, constexprs in KERNELS:
        verify_module(frontend_module(kernel, signature, constexprs))
    verify_module(parse_module(HAND_WRITTEN))


def test_use_before_definition():
    def fill(b, args):
        x = c(b, 1, I32)
        add = b.create("arith.add", [x, x], [I32])
        b.block.ops.remove(x.owner)
        b.block.ops.append(x.owner)          # now defined after its use
        return add
    with pytest.raises(VerificationError, match="'arith.add' op operand #0 does not dominate its use"):
        verify_module(build_kernel(fill))


def test_value_from_a_sibling_region_is_not_visible():
    def fill(b, args):
        then = _region([], lambda ib, _: [c(ib, 1, I32)])
        hidden = then.ops[0].results[0]
        b.create("scf.if", [args[2]], [I32], {}, [then, _region([], lambda ib, _: [c(ib, 2, I32)])])
        b.create("arith.add", [hidden, hidden], [I32])
    with pytest.raises(VerificationError, match="does not dominate its use"):
        verify_module(build_kernel(fill))


def test_terminators():
    def early_return(b, args):
        b.create("tl.return")
        c(b, 1, I32)
    with pytest.raises(VerificationError, match="'tl.return' op terminator must be the last op of its block"):
        verify_module(build_kernel(early_return))

    def wrong_terminator(b, args):
        block = Block([I32])
        Builder(block).create("tl.return")
        b.create("scf.for", [c(b, 0, I32), args[1], c(b, 1, I32)], [], {}, [Region(block)])
    with pytest.raises(VerificationError, match="'scf.for' op expected the body region to end with scf.yield, "
                                                "got tl.return"):
        verify_module(build_kernel(wrong_terminator))

    module = build_kernel(lambda b, args: None)
    module.kernels[0].regions[0].ops.pop()
    with pytest.raises(VerificationError, match="'tl.kernel' op expected the body to end with tl.return"):
        verify_module(module)


def test_region_count():
    def extra_region(b, args):
        b.create("arith.add", [args[1], args[1]], [I32], {}, [_region([])])
    with pytest.raises(VerificationError, match="'arith.add' op expected 0 regions, got 1"):
        verify_module(build_kernel(extra_region))


def test_verifier_never_crashes_on_malformed_ops():
    """Random operand/result/attribute/region combinations for every op: the
    verifier answers with a VerificationError or accepts, never an internal
    exception."""
    rng = random.Random(1234)
    types = [I1, I32, F32, PF32, tensor(16), tensor(16, element=I1), tensor(16, 16, element=T.f16),
             tensor(16, element=PF32)]
    attrs = [{}, {"axis": 0}, {"axis": 5}, {"axis": "x"}, {"start": 0, "end": 16}, {"start": 0},
             {"perm": (1, 0)}, {"perm": ("a",)}, {"kind": "sum", "axis": 0}, {"has_mask": True},
             {"has_mask": True, "has_other": True}, {"predicate": "lt"}, {"value": 1}, {"value": "s"},
             {"prefix": 3}, {"kind": "add"}]

    def value(t):
        return Block([t]).args[0]

    for name, cls in sorted(OP_REGISTRY.items()):
        for _ in range(300):
            regions = []
            for _ in range(rng.randint(0, 2)):
                block = Block([rng.choice(types) for _ in range(rng.randint(0, 2))])
                if rng.random() < 0.7:
                    term = rng.choice(["scf.yield", "scf.condition", "tl.return"])
                    block.append(OP_REGISTRY[term]([value(rng.choice(types)) for _ in range(rng.randint(0, 2))]))
                regions.append(Region(block))
            op = cls([value(rng.choice(types)) for _ in range(rng.randint(0, 4))],
                     [rng.choice(types) for _ in range(rng.randint(0, 2))], dict(rng.choice(attrs)), regions)
            try:
                op.verify()
            except VerificationError as err:
                assert err.message.startswith(f"'{name}' op ")
