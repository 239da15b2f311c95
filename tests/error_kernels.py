"""A corpus of erroneous kernels for ``tests/test_errors.py``.

Each kernel contains exactly one mistake, on the line marked ``# <-``; the
test compiles it and asserts the error's line, column and message.  Every
parameter is annotated, so ``kernel.compile()`` needs no signature.  Keep
this a real file: the frontend reads kernels from their source.
"""
# ruff: noqa: F401, F821, F841, BLE001, PLW0602, RUF059, S110, SIM102
import numpy as np

import tlxc
import tlxc.language as tl

f32p = tl.pointer_type(tl.float32)
bf16p = tl.pointer_type(tl.bfloat16)
i32p = tl.pointer_type(tl.int32)
i32 = tl.int32
f32 = tl.float32

TABLE = np.arange(16)
COUNTER = 0


# -- unsupported Python syntax ----------------------------------------------------------------
@tlxc.kernel
def lambda_expr(x: f32p):
    v = tl.load(x)
    f = lambda a: a + v  # <-
    tl.store(x, f(1.0))


@tlxc.kernel
def try_stmt(x: f32p):
    try:  # <-
        tl.store(x, 0.0)
    except Exception:
        pass


@tlxc.kernel
def with_stmt(x: f32p):
    with open("f") as f:  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def class_def(x: f32p):
    class Pair:  # <-
        pass
    tl.store(x, 0.0)


@tlxc.kernel
def list_comprehension(x: f32p):
    offs = [i * 2 for i in tl.arange(0, 4)]  # <-
    tl.store(x, 0.0)


@tlxc.kernel
def dict_literal(x: f32p):
    table = {"a": 1}  # <-
    tl.store(x, 0.0)


@tlxc.kernel
def break_stmt(x: f32p, n: i32):
    for i in range(n):
        break  # <-


@tlxc.kernel
def continue_stmt(x: f32p, n: i32):
    for i in range(n):
        continue  # <-


@tlxc.kernel
def global_stmt(x: f32p):
    global COUNTER  # <-
    tl.store(x, 0.0)


@tlxc.kernel
def nested_def(x: f32p):
    def helper(v):  # <-
        return v
    tl.store(x, 0.0)


@tlxc.kernel
def pow_on_tensor(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    tl.store(x + tl.arange(0, 16), v ** 2)  # <-


@tlxc.kernel
def starred_assignment(x: f32p):
    a, *rest = (1, 2, 3)  # <-
    tl.store(x, 0.0)


@tlxc.kernel
def yield_expr(x: f32p):
    yield 1  # <-


@tlxc.kernel
def walrus(x: f32p, n: i32):
    if (m := n + 1) > 0:  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def for_over_list(x: f32p):
    for v in [1, 2, 3]:  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def raise_stmt(x: f32p):
    raise ValueError("no")  # <-


@tlxc.kernel
def import_in_kernel(x: f32p):
    import math  # <-
    tl.store(x, 0.0)


# -- names --------------------------------------------------------------------------------------
@tlxc.kernel
def undefined_name(x: f32p, offset: i32):
    tl.store(x + ofset, 0.0)  # <-


@tlxc.kernel
def unknown_builtin(x: f32p):
    tl.store(x, tl.exp3(1.0))  # <-


@tlxc.kernel
def unknown_tensor_attribute(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    tl.store(x + tl.arange(0, 16), v.foo)  # <-


@tlxc.kernel
def global_numpy_array(x: f32p):
    tl.store(x, TABLE)  # <-


# -- shapes -------------------------------------------------------------------------------------
@tlxc.kernel
def binop_shape_mismatch(x: f32p):
    a = tl.load(x + tl.arange(0, 64))
    b = tl.load(x + tl.arange(0, 32))
    tl.store(x + tl.arange(0, 64), a + b)  # <-


@tlxc.kernel
def dot_inner_dims(x: f32p):
    a = tl.zeros((32, 64), dtype=tl.float16)
    b = tl.zeros((32, 32), dtype=tl.float16)
    c = tl.dot(a, b)  # <-


@tlxc.kernel
def dot_too_small(x: f32p):
    a = tl.zeros((8, 32), dtype=tl.float16)
    b = tl.zeros((32, 32), dtype=tl.float16)
    c = tl.dot(a, b)  # <-


@tlxc.kernel
def dot_dtype_mismatch(x: f32p):
    a = tl.zeros((32, 32), dtype=tl.float16)
    b = tl.zeros((32, 32), dtype=tl.bfloat16)
    c = tl.dot(a, b)  # <-


@tlxc.kernel
def reshape_numel(x: f32p):
    v = tl.arange(0, 64)
    w = tl.reshape(v, (4, 8))  # <-


# -- compile-time constants required --------------------------------------------------------------
@tlxc.kernel
def arange_runtime_bound(x: f32p, n: i32):
    offs = tl.arange(0, n)  # <-


@tlxc.kernel
def zeros_runtime_shape(x: f32p, n: i32):
    acc = tl.zeros((n,), dtype=tl.float32)  # <-


@tlxc.kernel
def reduce_runtime_axis(x: f32p, axis: i32):
    v = tl.load(x + tl.arange(0, 16))
    s = tl.sum(v, axis=axis)  # <-


@tlxc.kernel
def arange_not_power_of_two(x: f32p):
    offs = tl.arange(0, 100)  # <-


@tlxc.kernel
def static_assert_fails(x: f32p, BLOCK: tl.constexpr = 48):
    tl.static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32")  # <-


@tlxc.kernel
def _helper_with_constexpr(x, N: tl.constexpr):
    return x + tl.sum(tl.arange(0, N), axis=0)  # <-


@tlxc.kernel
def helper_runtime_constexpr(x: f32p, n: i32):
    y = _helper_with_constexpr(1.0, n)


@tlxc.kernel
def static_range_runtime(x: f32p, n: i32):
    for i in tl.static_range(n):  # <-
        tl.store(x, 0.0)


# -- calls --------------------------------------------------------------------------------------
@tlxc.kernel
def _add_two(a, b):
    return a + b


@tlxc.kernel
def helper_wrong_arg_count(x: f32p):
    y = _add_two(1.0)  # <-


@tlxc.kernel
def builtin_wrong_arg_count(x: f32p):
    pid = tl.program_id(0, 1)  # <-


@tlxc.kernel
def unexpected_keyword(x: f32p):
    v = tl.load(x, maske=None)  # <-


def plain_python_function(v):
    return v * 2


@tlxc.kernel
def python_function_runtime(x: f32p):
    v = tl.load(x)
    tl.store(x, plain_python_function(v))  # <-


@tlxc.kernel
def python_min_runtime(x: f32p, n: i32):
    m = min(n, 4, key=abs)  # <-


@tlxc.kernel
def _recursive(v, depth: tl.constexpr):
    return _recursive(v, depth + 1)  # <-


@tlxc.kernel
def recursion(x: f32p):
    tl.store(x, _recursive(1.0, 0))


@tlxc.kernel
def dtype_called(x: f32p):
    v = tl.float16(1.0, 2.0)  # <-


@tlxc.kernel
def range_outside_for(x: f32p):
    r = range(4)  # <-


# -- dtypes -------------------------------------------------------------------------------------
@tlxc.kernel
def bitwise_on_floats(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    w = v & v  # <-


@tlxc.kernel
def floordiv_on_floats(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    w = v // 2.0  # <-


@tlxc.kernel
def pointer_times_pointer(x: f32p, y: f32p):
    z = x * y  # <-


@tlxc.kernel
def pointer_plus_float(x: f32p):
    z = x + 1.5  # <-


@tlxc.kernel
def load_non_pointer(x: f32p, n: i32):
    v = tl.load(n + tl.arange(0, 16))  # <-


@tlxc.kernel
def store_shape_mismatch(x: f32p):
    offs = tl.arange(0, 16)
    v = tl.zeros((32,), dtype=tl.float32)
    tl.store(x + offs, v)  # <-


@tlxc.kernel
def mask_shape_mismatch(x: f32p):
    offs = tl.arange(0, 16)
    mask = tl.arange(0, 32) < 8
    v = tl.load(x + offs, mask=mask)  # <-


@tlxc.kernel
def integer_mask(x: f32p, n: i32):
    offs = tl.arange(0, 16)
    v = tl.load(x + offs, mask=offs)  # <-
    tl.store(x + offs, v, mask=offs < n)


@tlxc.kernel
def float_mask_store(x: f32p):
    offs = tl.arange(0, 16)
    v = tl.load(x + offs)
    tl.store(x + offs, v, mask=v)  # <-


@tlxc.kernel
def where_pointer_mix(x: f32p, n: i32):
    p = tl.where(n > 0, x, n)  # <-


@tlxc.kernel
def other_without_mask(x: f32p):
    v = tl.load(x + tl.arange(0, 16), other=0.0)  # <-


@tlxc.kernel
def invert_float(x: f32p):
    v = tl.load(x)
    w = ~v  # <-


# -- control flow and types ---------------------------------------------------------------------
@tlxc.kernel
def loop_carried_int_to_float(x: f32p, n: i32):
    acc = 0
    for i in range(n):
        acc = acc + tl.load(x + i)  # <-
    tl.store(x, acc)


@tlxc.kernel
def loop_carried_f32_to_bf16(x: f32p, n: i32):
    acc = tl.zeros((16,), dtype=tl.float32)
    for i in range(n):
        acc = acc.to(tl.bfloat16)  # <-


@tlxc.kernel
def while_carried_shape_change(x: f32p, n: i32):
    acc = tl.zeros((16,), dtype=tl.float32)
    while n > 0:
        acc = tl.zeros((32,), dtype=tl.float32)  # <-
        n = n - 1


@tlxc.kernel
def if_branches_differ(x: f32p, y: bf16p, n: i32):
    if n > 0:  # <-
        v = tl.load(x)
    else:
        v = tl.load(y)
    tl.store(x, v)


@tlxc.kernel
def defined_in_one_branch(x: f32p, n: i32):
    if n > 0:
        v = tl.load(x)
    tl.store(x, v)  # <-


@tlxc.kernel
def defined_in_loop(x: f32p, n: i32):
    for i in range(n):
        v = tl.load(x + i)
    tl.store(x, v)  # <-


@tlxc.kernel
def loop_variable_after_loop(x: f32p, n: i32):
    for i in range(n):
        tl.store(x + i, 0.0)
    tl.store(x + i, 1.0)  # <-


@tlxc.kernel
def return_in_loop(x: f32p, n: i32):
    for i in range(n):
        if i > 3:
            return  # <-


@tlxc.kernel
def kernel_returns_value(x: f32p):
    return tl.load(x)  # <-


@tlxc.kernel
def tensor_if_condition(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    if v > 0:  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def tensor_while_condition(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    while v > 0:  # <-
        v = v - 1.0


@tlxc.kernel
def constexpr_changed_in_loop(x: f32p, n: i32):
    scale = 1
    for i in range(n):
        scale = "fast"  # <-
    tl.store(x, 0.0)


@tlxc.kernel
def assert_false_constexpr(x: f32p, BLOCK: tl.constexpr = 48):
    assert BLOCK % 32 == 0, "BLOCK must be a multiple of 32"  # <-


# -- tensors are values, not arrays --------------------------------------------------------------
@tlxc.kernel
def tensor_int_index(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    tl.store(x, v[0])  # <-


@tlxc.kernel
def tensor_item_assignment(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    v[0] = 1.0  # <-


@tlxc.kernel
def tensor_partial_slice(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    w = v[2:4]  # <-


@tlxc.kernel
def tensor_augassign_subscript(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    v[0] += 1.0  # <-


@tlxc.kernel
def attribute_assignment(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    v.dtype = tl.float16  # <-


# -- errors inside helpers point at the helper's line ---------------------------------------------
@tlxc.kernel
def _bad_helper(v):
    return v + tl.arange(0, 32)  # <-


@tlxc.kernel
def error_in_helper(x: f32p):
    v = tl.load(x + tl.arange(0, 16))
    tl.store(x + tl.arange(0, 16), _bad_helper(v))


# -- more misuse --------------------------------------------------------------------------------
@tlxc.kernel
def store_string_value(x: f32p):
    tl.store(x, "hello")  # <-


@tlxc.kernel
def abs_of_pointer(x: f32p):
    y = tl.abs(x)  # <-


@tlxc.kernel
def cast_pointer_to_float(x: f32p):
    y = x.to(tl.float32)  # <-


@tlxc.kernel
def matmul_operator(x: f32p):
    a = tl.zeros((32, 32), dtype=tl.float16)
    c = a @ a  # <-


@tlxc.kernel
def compare_with_none(x: f32p, n: i32):
    c = n == None  # <-


@tlxc.kernel
def string_plus_tensor(x: f32p, n: i32):
    c = n + "s"  # <-


@tlxc.kernel
def mixed_signedness_division(x: f32p, n: i32):
    u = tl.zeros((16,), dtype=tl.uint32)
    c = u // n  # <-


@tlxc.kernel
def dot_acc_shape(x: f32p):
    a = tl.zeros((32, 32), dtype=tl.float16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    c = tl.dot(a, a, acc=acc)  # <-


@tlxc.kernel
def program_id_axis(x: f32p):
    pid = tl.program_id(3)  # <-


@tlxc.kernel
def constexpr_annotation_runtime(x: f32p, n: i32):
    B: tl.constexpr = n + 1  # <-


@tlxc.kernel
def unpack_tensor(x: f32p):
    a, b = tl.load(x)  # <-


@tlxc.kernel
def loop_carried_float_literal(x: f32p, n: i32):
    i = 0
    while i < n:
        i = 1.5  # <-


@tlxc.kernel
def if_literal_mismatch(x: f32p, n: i32):
    if n > 0:  # <-
        v = n
    else:
        v = 1.5
    tl.store(x, v)


@tlxc.kernel
def static_range_too_long(x: f32p):
    for i in tl.static_range(10000):  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def range_step_zero(x: f32p, n: i32):
    for i in range(0, n, 0):  # <-
        tl.store(x, 0.0)


@tlxc.kernel
def hint_float_values(x: f32p):
    offs = tl.multiple_of(tl.arange(0, 16), 16.5)  # <-


@tlxc.kernel
def reduce_axis_out_of_range(x: f32p):
    s = tl.sum(tl.arange(0, 16), axis=1)  # <-


@tlxc.kernel
def full_with_pointer_value(x: f32p):
    v = tl.full((16,), x, tl.float32)  # <-


@tlxc.kernel
def runtime_constexpr_option(x: f32p, n: i32):
    v = tl.load(x, cache_modifier=n)  # <-


@tlxc.kernel
def constexpr_becomes_tensor_in_loop(x: f32p, n: i32):
    dt = tl.float32
    for i in range(n):
        dt = tl.load(x)  # <-
