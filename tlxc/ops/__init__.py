"""``tlxc.ops``: ready-made GPU operators built from tlxc kernels.

- ``matmul(a, b, out=None, *, bias, activation, out_dtype, residual, scale_a, scale_b, config)``:
  GEMM with a fused epilogue and a shape-aware choice of kernel (docs/ops.md);
- ``matmul_op``: the same as the custom op ``torch.ops.tlxc.matmul`` (fake implementation for
  ``torch.compile(fullgraph=True)``, autograd: the backward is two matmuls);
- ``grouped_matmul(a, b_experts, group_sizes)``: the MoE grouped GEMM; ``grouped_matmul_op``: the
  custom op ``torch.ops.tlxc.grouped_matmul`` with autograd (``grouped_weight_grad``: its weight
  gradient);
- ``attention(q, k, v, *, causal, sm_scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
  max_seqlen_k, scale, window, softcap)``: softmax attention (GQA, head dims 8-256, varlen,
  sliding windows, logit softcapping), the custom op
  ``torch.ops.tlxc.attention`` with autograd; ``attention_forward`` returns ``(o, lse)``;
- ``attention_decode(q, k_cache, v_cache, cache_seqlens, *, block_table, sm_scale)``: one query
  token per sequence against a (paged) KV cache, split over the cache (``(o, lse)``; the custom
  op ``torch.ops.tlxc.attention_decode``).

Import ``tlxc.ops`` explicitly (``tlxc`` does not import it: it needs torch).
"""
from .attention import attention_forward
from .attention_decode import attention_decode, attention_decode_op
from .attention_op import attention, attention_op
from .custom_ops import matmul, matmul_op
from .grouped import grouped_weight_grad
from .grouped_op import grouped_matmul, grouped_matmul_op
from .matmul_configs import CONFIGS, GemmConfig, choose_config

__all__ = ["CONFIGS", "GemmConfig", "attention", "attention_decode", "attention_decode_op", "attention_forward", "attention_op", "choose_config", "grouped_matmul", "grouped_matmul_op",
           "grouped_weight_grad", "matmul", "matmul_op"]
