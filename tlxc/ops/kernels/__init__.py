"""The kernels behind ``tlxc.ops``: one file per kernel family.

- ``epilogue.py``: the fused epilogue (scales, bias, activation, residual), one helper
  every GEMM kernel calls on its float32 accumulator before the store;
- ``gemm_dot.py``: the pointer GEMM on ``tl.dot`` (any strides and sizes, split-K into a
  float32 workspace, small-M by operand swap) and the split-K reduction;
- ``gemm_ws.py``: the warp-specialized persistent TMA GEMM (TMA producer, two wgmma
  consumer warp groups), operands K- or M/N-major;
- ``grouped_gemm.py``: the grouped (MoE) GEMM;
- ``attention_fwd.py``: the attention forward (TMA producer, two or three wgmma consumer
  warp groups taking turns, persistent schedule; GQA, head dims 8-256, varlen, the lse);
- ``attention_schedule.py``: the varlen forward's sorted work table, built on the device;
- ``attention_decode.py``: split-KV decode over a paged or contiguous KV cache, and its combine;
- ``attention_bwd.py``: the attention backward (preprocess, dK/dV, dQ).
"""
