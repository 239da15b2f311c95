"""The blocked-tensor language (``import tlxc.language as tl``).

Every function here is a *builtin*: a signature and a docstring.  Calling one
from ordinary Python raises "did you forget @tlxc.kernel?"; inside a kernel the
frontend dispatches the call to its semantic rule in ``tlxc/frontend/semantic.py``
(builtin → semantic check → IR construction, three thin layers).
"""
from __future__ import annotations

import enum
import functools
import sys
from typing import Any

from ..errors import CompilationError, Location
from ..ir import types as _t

# -- dtypes (Triton's names) ------------------------------------------------
dtype = _t.ScalarType
int1 = _t.i1
int8, int16, int32, int64 = _t.i8, _t.i16, _t.i32, _t.i64
uint8, uint16, uint32, uint64 = _t.u8, _t.u16, _t.u32, _t.u64
float16, bfloat16, float32, float64 = _t.f16, _t.bf16, _t.f32, _t.f64
float8e4nv, float8e5 = _t.f8e4m3, _t.f8e5m2
float8_e4m3fn, float8_e5m2 = float8e4nv, float8e5   # torch spellings
bool_ = int1
void = None


class _UnsupportedDtype:
    """A Triton dtype tlxc does not implement (the fnuz fp8 formats of AMD's older chips, Triton's
    e4b15): the name exists, so a module that lists it in a table imports, and any use of it in a
    kernel is an error that names it."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what

    def __repr__(self) -> str:
        return f"tl.{self.name} ({self.what}, not supported by tlxc)"

    def tlxc_describe(self) -> str:
        return repr(self)


float8e4b8 = _UnsupportedDtype("float8e4b8", "fp8 e4m3 fnuz")
float8e5b16 = _UnsupportedDtype("float8e5b16", "fp8 e5m2 fnuz")
float8e4b15 = _UnsupportedDtype("float8e4b15", "fp8 e4m3 with exponent bias 15")


def pointer_type(element: _t.ScalarType) -> _t.PointerType:
    """The type of a pointer to ``element`` (for annotations and signatures)."""
    if not isinstance(element, (_t.ScalarType, _t.PointerType)):
        # located at the user's annotation; inside a kernel the frontend locates it instead
        loc = caller_location(2)
        if loc is not None and loc.file.startswith(_PACKAGE_DIR):
            loc = None
        raise CompilationError(f"tl.pointer_type expects a dtype such as tl.float32, got "
                               f"{type(element).__name__} {element!r}", loc)
    return _t.PointerType(element)


pi32_t = _t.PointerType(_t.ScalarType("i32"))       # Triton's name for a pointer to int32


class const:  # noqa: N801  (Triton's name)
    """Triton's ``tl.const``: annotate a pointer parameter with it (``in_ptr: tl.const``) and the
    kernel may only read through it: a store or an atomic through it (or a pointer computed from
    it) is a compile error, and it does not merge with a writable pointer."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tl.const annotates a pointer parameter (in_ptr: tl.const); it makes no values")


_PACKAGE_DIR = __file__.rsplit("/language/", 1)[0]


class PropagateNan(enum.Enum):
    """How ``tl.minimum``/``tl.maximum``/``tl.clamp`` treat NaN (Triton's names).
    ``NONE`` (the default): a NaN operand is ignored, as IEEE minNum/maxNum and
    ``fminf``/``fmaxf`` do; ``ALL``: the result is NaN when either operand is."""

    NONE = 0
    ALL = 0xFFFF


class constexpr:
    """A compile-time constant.  As an annotation (``BLOCK: tl.constexpr``)
    it marks a parameter whose value specializes the kernel."""

    def __init__(self, value: Any):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other) -> bool:
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self) -> int:
        return hash(self.value)


def _is_descriptor(obj) -> bool:
    """A kernel's tensor descriptor: an argument's (a runtime value of a tensordesc type) or
    ``tl.make_tensor_descriptor``'s (frontend/tensor_desc.py: ``__tlxc_descriptor__``)."""
    return getattr(type(obj), "__tlxc_descriptor__", False) or (
        getattr(type(obj), "__tlxc_runtime_value__", False) and isinstance(getattr(obj, "type", None),
                                                                           _t.TensorDescType))


class _RuntimeValueType(type):
    def __instancecheck__(cls, obj) -> bool:
        return getattr(type(obj), "__tlxc_runtime_value__", False) and not _is_descriptor(obj)


class _DescriptorType(type):
    def __instancecheck__(cls, obj) -> bool:
        return _is_descriptor(obj)


class tensor(metaclass=_RuntimeValueType):
    """Triton's ``tl.tensor``: the type of a kernel's runtime values, scalars and blocks.  It names
    them in annotations (``def f(x) -> tl.tensor``) and in ``isinstance(x, tl.tensor)`` inside a
    kernel (true for a runtime value, false for a compile-time one); tlxc makes such values only
    through the language's operations, never by calling this class."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tl.tensor values come from the language's operations inside a kernel; "
                        "tl.tensor(...) builds none (use tl.full / tl.to_tensor)")


class tensor_descriptor(metaclass=_DescriptorType):
    """Triton's ``tl.tensor_descriptor``: the type of a tensor descriptor in a kernel (an argument or
    ``tl.make_tensor_descriptor``'s result), for annotations and ``isinstance`` (a descriptor is
    not a ``tl.tensor``, as in Triton)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tensor descriptors come from tl.make_tensor_descriptor or a kernel argument; "
                        "tl.tensor_descriptor(...) builds none")


tensor_descriptor_base = tensor_descriptor       # Triton's base class name (host and device descriptors)

class _TupleType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, builtins_tuple)


builtins_tuple = tuple


class tuple(metaclass=_TupleType):  # noqa: A001  (Triton's name)
    """Triton's ``tl.tuple``: in a kernel ``tl.tuple(values)`` is the Python tuple of ``values``
    (tlxc's kernel tuples are Python tuples of values), and ``isinstance(x, tl.tuple)`` is true
    for a tuple; ``type`` (Triton's tuple type) is accepted only as None."""

    def __new__(cls, args=(), type=None):  # noqa: A002
        if type is not None:
            raise TypeError("tl.tuple(..., type=...): tlxc's kernel tuples carry no separate type; leave it out")
        return builtins_tuple(args)


BUILTINS: dict[str, Any] = {}
TRITON_MAX_TENSOR_NUMEL = _t.MAX_TENSOR_NUMEL     # the most elements one block may hold (Triton's name)


def caller_location(depth: int = 2) -> Location | None:
    """The user's source position ``depth`` frames up (1 = our caller), with
    the column of the call where Python records it (3.11+)."""
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    code = frame.f_code
    line, col, end_col = frame.f_lineno, 0, None
    positions = getattr(code, "co_positions", None)
    if positions is not None:
        for i, (start, end, start_col, stop_col) in enumerate(positions()):
            if i == frame.f_lasti // 2:
                if start is not None and start_col is not None:
                    line, col = start, start_col
                    end_col = stop_col if end == start else None
                break
    return Location(code.co_filename, line, col, end_col)


def outside_kernel_error(name: str) -> CompilationError:
    """"tl.X called outside a kernel", located at the user's call (two frames up)."""
    return CompilationError(f"{name} called outside a kernel: did you forget @tlxc.kernel?",
                            caller_location(3))


def builtin(fn):
    """Mark ``fn`` as a language builtin: callable only inside a kernel."""

    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"tl.{fn.__name__}")

    outside_kernel.__tlxc_builtin__ = fn.__name__
    outside_kernel.__tlxc_signature__ = fn
    BUILTINS[fn.__name__] = outside_kernel
    return outside_kernel


# -- program and ranges -----------------------------------------------------
@builtin
def program_id(axis):
    """This program's index along grid axis 0, 1 or 2 (i32)."""


@builtin
def num_programs(axis):
    """The number of programs along grid axis 0, 1 or 2 (i32)."""


@builtin
def arange(start, end):
    """``[start, end)`` as an i32 tensor; ``end - start`` is a power of two."""


@builtin
def zeros(shape, dtype):
    """A tensor of ``shape`` filled with zeros of ``dtype``."""


@builtin
def full(shape, value, dtype):
    """A tensor of ``shape`` filled with ``value`` converted to ``dtype``."""


@builtin
def zeros_like(input, shape=None, dtype=None):
    """Zeros with ``input``'s shape and dtype (or the given ones)."""


@builtin
def full_like(input, value, shape=None, dtype=None):
    """``value`` with ``input``'s shape and dtype (or the given ones)."""


@builtin
def cdiv(x, div):
    """``(x + div - 1) // div``."""


@builtin
def to_tensor(x):
    """``x`` as a runtime value: a tensor passes through; a Python number takes its literal
    type (int32, else uint32, int64, uint64; float32; int1 for a bool)."""


# -- memory -----------------------------------------------------------------
@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="",
         cache_modifier="", eviction_policy="", volatile=False):
    """Load a scalar or a tensor through ``pointer``; masked-off lanes get ``other``.
    Through a block pointer: no mask/other; elements outside the parent tensor along the
    ``boundary_check`` dims read ``padding_option`` ('zero', 'nan'; '' reads 0 in tlxc)."""


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Store ``value`` through ``pointer`` where ``mask`` holds (through a block pointer:
    except outside the parent tensor along the ``boundary_check`` dims)."""


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order):
    """A pointer to the ``block_shape`` block at ``offsets`` of the parent tensor at ``base``
    with ``shape`` and ``strides`` (numbers or integer scalars); ``block_shape`` and
    ``order`` (the dims from fastest to slowest in memory) are compile-time."""


@builtin
def advance(base, offsets):
    """The block pointer ``base`` moved by ``offsets`` elements per dimension."""


# In-kernel tensor descriptors (frontend/tensor_desc.py): masked loads and stores of the box,
# not TMA; a tlxc.TensorDescriptor argument takes the same calls and keeps its TMA path.
@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A descriptor of the tensor at ``base`` with ``shape`` and ``strides`` (numbers or integer
    scalars; 1 to 5 dimensions; ``strides[-1]`` must be 1) whose ``desc.load(offsets)`` /
    ``desc.store(offsets, value)`` move ``block_shape`` boxes (compile-time powers of two, the
    last at least 16 bytes); elements outside the tensor read ``padding_option`` ('zero' or
    'nan') and are not written."""


@builtin
def _experimental_make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """Triton 3.3's name of ``tl.make_tensor_descriptor``."""


@builtin
def load_tensor_descriptor(desc, offsets):
    """``desc.load(offsets)``."""


@builtin
def store_tensor_descriptor(desc, offsets, value):
    """``desc.store(offsets, value)``."""


@builtin
def _experimental_descriptor_load(desc_pointer, offsets, shape, dtype):
    """Triton 3.1's ``desc.load(offsets)``: ``shape`` must be the descriptor's block_shape; a
    ``dtype`` of the same width as the descriptor's reinterprets the bits."""


@builtin
def _experimental_descriptor_store(desc_pointer, value, offsets):
    """Triton 3.1's ``desc.store(offsets, value)``."""


class _HostDescriptorType:
    """``tl.nv_tma_desc_type``: Triton 3.1-3.3's type of a kernel parameter that receives a
    host-filled TMA descriptor (an object with ``tma_desc_cpu_ptr()``: runtime/tma_legacy.py).
    Code of that time tests ``"nv_tma_desc_type" in dir(tl)`` to pass the CPU buffer itself
    rather than a device copy; tlxc types such a parameter from the descriptor passed."""

    def __repr__(self) -> str:
        return "tl.nv_tma_desc_type"


nv_tma_desc_type = _HostDescriptorType()


# Atomics: ``sem`` is 'acq_rel' (Triton's default), 'acquire', 'release' or
# 'relaxed'; ``scope`` is 'gpu' (default), 'cta' or 'sys'.  Each returns the
# values memory held before it.
@builtin
def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    """Atomically add ``val``; returns the old values."""


@builtin
def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    """Atomic maximum (integers, f32, f64); returns the old values."""


@builtin
def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    """Atomic minimum (integers, f32, f64); returns the old values."""


@builtin
def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    """Atomic bitwise and (integers); returns the old values."""


@builtin
def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    """Atomic bitwise or (integers); returns the old values."""


@builtin
def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    """Atomic bitwise xor (integers); returns the old values."""


@builtin
def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    """Atomic exchange; returns the old values."""


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Atomic compare-and-swap: where memory equals ``cmp`` it becomes ``val``;
    returns the old values."""


@builtin
def debug_barrier():
    """Wait until every thread of the program (of the task) gets here (``__syncthreads``)."""


# -- elementwise ------------------------------------------------------------
@builtin
def where(condition, x, y):
    """``x`` where ``condition`` holds, else ``y`` (broadcast together)."""


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise minimum."""


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise maximum."""


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE):
    """``minimum(maximum(x, min), max)``."""


@builtin
def exp(x):
    """e**x."""


@builtin
def exp2(x):
    """2**x."""


@builtin
def log(x):
    """Natural logarithm."""


@builtin
def log2(x):
    """Base-2 logarithm."""


@builtin
def sqrt(x):
    """Square root."""


@builtin
def rsqrt(x):
    """1 / sqrt(x)."""


@builtin
def abs(x):
    """Absolute value."""


@builtin
def sin(x):
    """Sine."""


@builtin
def cos(x):
    """Cosine."""


@builtin
def floor(x):
    """Round toward -inf."""


@builtin
def ceil(x):
    """Round toward +inf."""


@builtin
def erf(x):
    """Error function."""


@builtin
def fma(x, y, z):
    """``x * y + z`` with one rounding."""


@builtin
def map_elementwise(scalar_fn, *args, pack=1):
    """``scalar_fn`` (a ``@jit`` function of scalars) applied to every element of the broadcast
    ``args``.  tlxc runs it once on the whole tensors, which elementwise operations make the
    same: its body may not branch on its arguments (an ``if`` on a tensor is an error there)."""


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """Run the PTX ``asm`` on every ``pack`` elements of the broadcast ``args`` (``$0..`` the
    results, one per ``dtype``, then the operands; ``constraints`` as in CUDA's asm, e.g.
    ``"=r,r"``).  GPU only: the interpreter cannot run PTX."""


@builtin
def sigmoid(x):
    """``1 / (1 + exp(-x))``."""


@builtin
def umulhi(x, y):
    """High 32 bits of the 64-bit product of two u32/i32."""


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """Convert ``input`` to ``dtype`` (or reinterpret its bits)."""


# -- shapes -----------------------------------------------------------------
@builtin
def broadcast_to(input, *shape):
    """Broadcast ``input`` to ``shape``."""


@builtin
def broadcast(input, other):
    """Broadcast two tensors to their common shape."""


@builtin
def expand_dims(input, axis):
    """Insert a size-1 dimension at ``axis``."""


@builtin
def reshape(input, *shape, can_reorder=False):
    """Row-major reshape."""


@builtin
def view(input, *shape):
    """Reshape (Triton's legacy spelling)."""


@builtin
def trans(input, *dims):
    """Transpose a 2-D tensor, or permute by ``dims``."""


@builtin
def permute(input, *dims):
    """Permute the dimensions by ``dims``."""


@builtin
def split(a):
    """The two halves of ``a`` along its last dimension, which must have size 2."""


@builtin
def join(a, b):
    """``a`` and ``b`` stacked along a new last dimension of size 2."""


# -- reductions -------------------------------------------------------------
@builtin
def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum along ``axis`` (all axes if None)."""


@builtin
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    """Maximum along ``axis``."""


@builtin
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True,
        keep_dims=False):
    """Minimum along ``axis``."""


@builtin
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the maximum along ``axis`` (the first one on ties)."""


@builtin
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the minimum along ``axis`` (the first one on ties)."""


@builtin
def xor_sum(input, axis=None, keep_dims=False):
    """XOR of the elements along ``axis``."""


# -- scans and combine-function reductions ----------------------------------
@builtin
def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of ``input`` (a tensor or a tuple of tensors) along ``axis`` with
    the ``@tlxc.jit`` function ``combine_fn(a..., b...)``."""


@builtin
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduce ``input`` (a tensor or a tuple) along ``axis`` (all if None) with ``combine_fn``."""


@builtin
def cumsum(input, axis=0, reverse=False, dtype=None):
    """Inclusive cumulative sum along ``axis``."""


@builtin
def cumprod(input, axis=0, reverse=False):
    """Inclusive cumulative product along ``axis``."""


@builtin
def sort(x, dim=None, descending=False):
    """``x`` sorted along ``dim`` (the last dimension by default; a power-of-two size)."""


@builtin
def flip(x, dim=None):
    """``x`` reversed along ``dim`` (the last dimension by default; a power-of-two size)."""


# -- matrix -----------------------------------------------------------------
@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None,
        max_num_imprecise_acc=None, out_dtype=float32):
    """Tile-level matrix product ``acc + input @ other`` (M, N, K ≥ 16)."""


@builtin
def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False,
               lhs_k_pack=True, rhs_k_pack=True, out_dtype=float32):
    """``acc + (lhs * 2^(lhs_scale - 127)) @ (rhs * 2^(rhs_scale - 127))``: microscaled (mx)
    operands, formats ``"e4m3"``, ``"e5m2"``, ``"bf16"``, ``"fp16"``, uint8 ue8m0 scales per 32
    elements along K ([M, K // 32] and [N, K // 32], or None)."""


# -- hints, static checks, debugging -----------------------------------------
@builtin
def assume(cond):
    """Promise that ``cond`` holds (Triton's optimization hint: ``tl.assume(pid >= 0)``); tlxc
    checks that it is a boolean and uses it for nothing else."""


@builtin
def multiple_of(input, values):
    """Promise that each element (or the first of each run) is a multiple of ``values``."""


@builtin
def max_contiguous(input, values):
    """Promise runs of ``values`` consecutive integers."""


@builtin
def max_constancy(input, values):
    """Promise runs of ``values`` equal elements."""


@builtin
def static_assert(cond, msg=""):
    """Fail compilation unless the compile-time ``cond`` holds."""


@builtin
def static_print(*values):
    """Print compile-time values while compiling."""


@builtin
def device_print(prefix, *args, hex=False):
    """Print ``prefix`` and every element of ``args`` from the device."""


@builtin
def device_assert(cond, msg=""):
    """Fail the launch where ``cond`` is false (debug builds)."""


class static_range:
    """``for i in tl.static_range(...)``: unrolled at compile time; ``i`` is constexpr."""

    def __init__(self, arg1, arg2=None, step=None):
        self.args = (arg1, arg2, step)

    def __iter__(self):
        raise outside_kernel_error("tl.static_range")


class range:
    """``for i in tl.range(lb, ub, step, num_stages=...)``: a runtime loop
    (``num_stages`` and ``loop_unroll_factor`` are accepted hints)."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 flatten=False, warp_specialize=False, disallow_acc_multi_buffer=False):
        self.args = (arg1, arg2, step)

    def __iter__(self):
        raise outside_kernel_error("tl.range")
