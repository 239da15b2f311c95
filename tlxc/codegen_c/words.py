"""Elements <-> 32-bit words, for the vector accesses of every C-style target (CUDA and HIP):
a 64- or 128-bit load or store moves whole 32-bit words, so the elements of a narrower type are
packed into words before a store and unpacked after a load (C expressions, as text)."""
from __future__ import annotations

from ..ir.types import PointerType
from . import c_types as C


def element_bits(t) -> int:
    """Bits of one stored element (a pointer is 64, a bool a byte)."""
    if isinstance(t, PointerType):
        return 64
    return 8 if t.is_boolean else t.bits


def pack_words(elems: list[str], t, words: int) -> list[str]:
    """Storage elements -> 32-bit words."""
    bits = element_bits(t)
    if bits == 32:
        return [f"__float_as_uint({e})" if t.name == "f32" else f"(unsigned)({e})" for e in elems]
    if bits == 64:
        out = []
        for e in elems:
            as_u64 = f"(unsigned long long)__double_as_longlong({e})" if t.name == "f64" \
                else f"(unsigned long long)({e})"
            out += [f"(unsigned)({as_u64})", f"(unsigned)(({as_u64}) >> 32)"]
        return out
    per_word = 32 // bits
    mask = (1 << bits) - 1
    out = []
    for w in range(words):
        parts = [f"(((unsigned)({elems[w * per_word + k]}) & {mask}u) << {k * bits})" for k in range(per_word)]
        out.append("(" + " | ".join(parts) + ")")
    return out


def unpack_words(words: list[str], t, width: int) -> list[str]:
    """32-bit words -> storage elements."""
    bits = element_bits(t)
    ctype = C.storage_type(t)
    if bits == 32:
        return [f"__uint_as_float({w})" if t.name == "f32" else f"({ctype})({w})" for w in words]
    if bits == 64:
        out = []
        for j in range(width):
            u64 = f"(((unsigned long long){words[2 * j + 1]} << 32) | {words[2 * j]})"
            out.append(f"__longlong_as_double((long long){u64})" if t.name == "f64" else f"({ctype}){u64}")
        return out
    per_word = 32 // bits
    mask = (1 << bits) - 1
    return [f"({ctype})(({words[j // per_word]} >> {(j % per_word) * bits}) & {mask}u)" for j in range(width)]


def vector_load_call(helper: str, dst: str, ptr: str, t, width: int) -> str:
    """``dst[i..i+width)`` loaded by ``helper(ptr, w0, ...)`` (a 32- to 128-bit load into words)."""
    words = element_bits(t) * width // 32
    names = ", ".join(f"w{k}" for k in range(words))
    unpacked = unpack_words([f"w{k}" for k in range(words)], t, width)
    assigns = " ".join(f"{dst}[i + {j}] = {unpacked[j]};" for j in range(width))
    return f"{{ unsigned {names}; {helper}({ptr}, {names}); {assigns} }}"


def vector_store_call(helper: str, src: str, ptr: str, t, width: int) -> str:
    """``src[i..i+width)`` stored by ``helper(ptr, w0, ...)``."""
    packed = pack_words([f"{src}[i + {j}]" for j in range(width)], t, element_bits(t) * width // 32)
    return f"{helper}({ptr}, {', '.join(packed)});"


def predicated_vector_load_call(helper: str, dst: str, ptr: str, pred: str, fill: str, t, width: int) -> str:
    """``dst[i..i+width)`` loaded by ``helper(ptr, pred, w0, ...)``: the words start as ``fill``'s
    (``fill`` indexed like ``dst``: ``[i]`` becomes ``[i + j]``) and keep it where ``pred`` is false."""
    words = element_bits(t) * width // 32
    fills = [fill.replace("[i]", f"[i + {j}]") if j else fill for j in range(width)]
    packed = pack_words(fills, t, words)
    decl = "unsigned " + ", ".join(f"w{k} = {packed[k]}" for k in range(words)) + ";"
    call = f"{helper}({ptr}, {pred}, {', '.join(f'w{k}' for k in range(words))});"
    unpacked = unpack_words([f"w{k}" for k in range(words)], t, width)
    assigns = " ".join(f"{dst}[i + {j}] = {unpacked[j]};" for j in range(width))
    return f"{{ {decl} {call} {assigns} }}"
