"""A loop-invariant register-A operand of ``tlx.async_dot`` (the decode split kernel's Q) is copied
into its MMA registers on every iteration through ``tlx_fresh_registers`` (identity ``prmt``), a
loop-variant one (P) only pinned.  Without the copy ptxas 13.0 (the NVRTC of the H200 machine)
left Q's fragments in fixed registers and gave them to P's fragments too, so from the second key
block on Q K^T multiplied K by the previous block's P (the decode ``_variant=4`` / ``7`` failures of
session 15 run 3; NVRTC 13.5 copies Q each iteration by itself).  The SASS check below fails on
the unfixed text with NVRTC 13.0 (checked by hand with its wheel: ``F2FP.BF16.F32.PACK_AB R88``
.. ``R103`` in the loop, read by the next iteration's first HGMMA); with NVRTC 13.5 it holds
either way."""
from __future__ import annotations

import importlib
import importlib.util
import re

import pytest
import torch
from sass_dump import sass as dump_sass

from tlxc.codegen_nvptx.rules_mma_async import loop_invariant
from tlxc.ir.core import BlockArgument
from tlxc.ir.types import TensorType

M = importlib.import_module("tlxc.ops.attention_decode")


def _decode_handle(variant: int):
    lens = torch.tensor([0, 1, 700, 5000, 129], dtype=torch.int32)
    k = torch.zeros(100, 64, 1, 64, dtype=torch.bfloat16)
    q = torch.zeros(5, 8, 64, dtype=torch.bfloat16)
    table = torch.zeros(5, 79, dtype=torch.int32)
    handles = M.compile_decode(q, k, k, lens, block_table=table, num_splits=1, _variant=variant)
    (split,) = [h for h in handles if h.kfn.__name__ == "decode_split_kernel"]
    return split


def _mma_operand_pins(cuda: str) -> list[tuple[str, str]]:
    """(B major template argument, the helper that last wrote its A registers) of each register-A
    wgmma call, in text order."""
    pins = {name: helper for helper, name in re.findall(r"(tlx_\w+_registers)<\d+>\((afrag\w*)\);", cuda)}
    return [(major, pins[name]) for major, name in re.findall(r"_rs<(\d)>\(&\w+\[\d+\], (afrag\w*)\[0\]", cuda)]


@pytest.mark.parametrize("variant", [0, 4, 7])
def test_decode_q_fragments_are_fresh_and_p_fragments_pinned(variant):
    """Q K^T (K-major B, ``_rs<0>``): Q is the loop's invariant, its four k steps through
    ``tlx_fresh_registers``; P V (``_rs<1>``): P is computed in the loop, pinned only."""
    cuda = _decode_handle(variant).asm["cuda"]
    calls = _mma_operand_pins(cuda)
    assert calls == [("0", "tlx_fresh_registers")] * 4 + [("1", "tlx_pin_registers")] * 4, calls
    assert cuda.count('prmt.b32 %0, %0, 0, 0x3210;') == 1          # the helper, defined once


def test_loop_invariance_of_the_decode_operands(monkeypatch):
    """``loop_invariant`` on the post-pass IR: Q (loaded before the loop) yes, P (from the loop's
    S) no; the loop's carried values no."""
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    launches = []
    monkeypatch.setattr(M, "_launch", lambda kernel, grid, *args, **meta: launches.append((kernel, args, meta)))
    lens = torch.tensor([0, 1, 700, 5000, 129], dtype=torch.int32)
    k = torch.zeros(100, 64, 1, 64, dtype=torch.bfloat16)
    M.attention_decode(torch.zeros(5, 8, 64, dtype=torch.bfloat16), k, k, lens,
                       block_table=torch.zeros(5, 79, dtype=torch.int32), num_splits=1, check=False, _variant=4)
    ((kernel, args, meta),) = launches
    num_warps = meta.pop("num_warps")
    spec = specialization_from_args(kernel, dict(zip(kernel.param_names, args), **meta))
    module = compile_kernel(kernel, spec, num_warps=num_warps, stages=("ir.opt",)).module     # post-pass IR
    dots = [op for op in module.walk() if op.name == "tlx.async_dot"]
    register_a = [op for op in dots if isinstance(op.operands[0].type, TensorType)]
    assert len(register_a) == 2, [str(op.operands[0].type) for op in dots]
    qk, pv = register_a
    assert loop_invariant(qk.operands[0], qk) and not loop_invariant(pv.operands[0], pv)
    loop = pv.parent_op()
    while loop.name != "scf.for":
        loop = loop.parent_op()
    carried = [a for a in loop.regions[0].args if isinstance(a, BlockArgument)]
    assert carried and not any(loop_invariant(a, pv) for a in carried)



def _written(text: str) -> set[int]:
    """The R registers an instruction writes (its first operand; two for 64-bit results)."""
    text = re.sub(r"^@!?U?P\w+\s+", "", text)
    op, _, rest = text.partition(" ")
    if op.startswith(("HGMMA", "ST", "BRA", "BAR", "WARPGROUP", "DEPBAR", "LDGSTS", "RED", "EXIT")):
        return set()
    first = re.match(r"R(\d+)\b", rest.strip())
    if first is None:
        return set()
    wide = ".64" in op or op.startswith(("IMAD.WIDE", "CS2R"))
    return {int(first.group(1)), int(first.group(1)) + 1} if wide else {int(first.group(1))}


@pytest.mark.parametrize("variant", [0, 4, 7])
def test_decode_loop_does_not_overwrite_q_fragments(variant, tmp_path):
    """In the SASS of the key-block loop, each register a Q K^T HGMMA (B K-major: no ``tnspB``)
    reads as A is written before it in the loop (Q copied or refreshed in) or not written after
    it: else the next iteration's HGMMA reads what the loop wrote there (P, with ptxas 13.0)."""
    sass = dump_sass(_decode_handle(variant).asm["cubin"], tmp_path)
    ins = [(int(m.group(1), 16), m.group(2)) for m in
           re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;", sass)]
    at = {a: i for i, (a, _) in enumerate(ins)}
    loops = [(at[int(m.group(1), 16)], i) for i, (a, t) in enumerate(ins)
             if (m := re.search(r"BRA (0x[0-9a-f]+)", t)) and int(m.group(1), 16) < a]
    checked = 0
    for lo, hi in loops:
        body = ins[lo:hi + 1]
        mmas = [(k, re.match(r"HGMMA\S* R\d+, R(\d+),", t)) for k, (_, t) in enumerate(body)]
        mmas = [(k, int(m.group(1)), "tnspB" in body[k][1]) for k, m in mmas if m]
        if not mmas:
            continue
        for k, a0, trans in mmas:
            if trans:
                continue
            before = set().union(*(_written(t) for _, t in body[:k]))
            carried = set(range(a0, a0 + 4)) - before       # what the previous iteration left there
            late = [f"{addr:#x} {t}" for addr, t in body[k + 1:] if carried & _written(t)]
            assert not late, f"Q's fragment R{a0}..R{a0 + 3} is what the loop wrote after its HGMMA: {late[:3]}"
            checked += 1
    assert checked == 4        # Q K^T's four k steps (D = 64)
