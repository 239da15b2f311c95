"""``tlxc.ops.grouped_matmul``: the MoE grouped GEMM (kernels/grouped_gemm.py).

    out = grouped_matmul(a, b_experts, group_sizes)
    # out[offs[g]:offs[g+1]] = a[offs[g]:offs[g+1]] @ b_experts[g],  offs = cumsum(group_sizes)

``a``: ``[total_M, K]`` (rows grouped by expert, in expert order), ``b_experts``: ``[E, K, N]``
(any strides: ``w.transpose(1, 2)`` of ``[E, N, K]`` weights is read in place),
``group_sizes``: ``[E]`` non-negative integers on the device (no host sync: the kernel finds
each program's group itself).  Their sum may be less than ``total_M``: the rows after it belong
to no expert, and their output rows are zeros (their gradient too).  A negative size or a sum
over ``total_M`` fails the launch (a device assertion naming ``group_sizes``).
bf16 or fp16; the output has the operands' dtype (or ``out_dtype``).  fp8 (both operands
``float8_e4m3fn`` or both ``float8_e5m2``, ``b_experts`` K-major: ``w.transpose(1, 2)`` of ``[E, N, K]``
weights; a bfloat16 output unless ``out_dtype`` says otherwise), as ``torch._scaled_grouped_mm``:
``out[rows of g] = (a @ b_experts[g]) * scale_a[rows] * scale_b[g]`` with ``scale_a`` float32 of one
element or one per row of ``a``, ``scale_b`` float32 of one element, one per expert (``[E]``) or one per
expert and column (``[E, N]``); the products are summed in the wgmma accumulator (``use_fast_accum=True``,
the default) or each k-step's added in float32 (``use_fast_accum=False``).  The scales apply to 16-bit
operands too.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import language as tl
from ..descriptors import TensorDescriptor
from .kernels.epilogue import ACTIVATIONS, GLU_FIRST
from .kernels.grouped_gemm import check_sizes_kernel, grouped_gemm_kernel
from .kernels.grouped_gemm_swap import grouped_gemm_swap_kernel
from .kernels.grouped_gemm_ws import group_table_kernel, grouped_gemm_ws_kernel
from .kernels.grouped_wgrad import grouped_wgrad_kernel
from .kernels.grouped_wgrad_ws import grouped_wgrad_ws_kernel
from .matmul import FP8_DTYPES, OUT_DTYPES, TL_DTYPES, _tma_rows, _tma_stores, align_fact, dot_aligns
from .matmul_configs import SHARED_LIMIT

GROUPED_CONFIGS = {          # name: (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): the pointer kernel
    "g_128x128x64": (128, 128, 64, 4, 3),
    "g_64x128x64": (64, 128, 64, 4, 4),
    "g_128x256x64": (128, 256, 64, 8, 3),
    # fp8 (``g8_``: 8-bit operands only): 128 bytes of K a step, as the 16-bit tiles' 64 elements
    "g8_64x128x128": (64, 128, 128, 4, 4),
    "g8_128x128x128": (128, 128, 128, 4, 3),
}


class GroupedWsConfig(NamedTuple):
    """A ``GROUPED_WS_CONFIGS`` entry: the warp-specialized TMA kernel's tile, ring and tile order."""
    bm: int
    bn: int
    bk: int
    stages: int
    expert_group_m: int        # expert order in bands of at most this many row tiles (0: the grouped order)
    dynamic: bool              # tiles drawn from a counter after a program's first
    column_bands: int          # bands of this many column tiles walk every expert's row tiles (0: none)
    cluster_n: int = 1         # 2: CTA pairs, two column tiles side by side sharing a's boxes by multicast


# name: (BM, BN, BK, stages, expert order, dynamic, column bands[, cluster]): the warp-specialized TMA kernel
GROUPED_WS_CONFIGS = {
    "gws_128x256x64_s4": (128, 256, 64, 4, 0, False, 0),
    "gws_128x128x64_s5": (128, 128, 64, 5, 0, False, 0),
    # expert order (``_eG``): each expert's tiles together, in bands of at most G row tiles
    # inside the expert (kernels/grouped_gemm_ws.py, find_expert_tile); 0 = the grouped order of
    # all row tiles, bands of GROUP_M that may span two experts.  ``d``: the dynamic schedule
    # (after its first tile a program's producer draws the next tile index from a counter,
    # so programs that got cheap tiles take more of them)
    "gws_128x256x64_s4_e8": (128, 256, 64, 4, 8, False, 0),
    "gws_128x256x64_s4_e16": (128, 256, 64, 4, 16, False, 0),
    "gws_128x128x64_s5_e8": (128, 128, 64, 5, 8, False, 0),
    "gws_128x256x64_s4_e16d": (128, 256, 64, 4, 16, True, 0),
    "gws_128x256x64_s4_e8d": (128, 256, 64, 4, 8, True, 0),
    "gws_128x128x64_s5_e8d": (128, 128, 64, 5, 8, True, 0),
    # column bands (``_nG``): G column tiles at a time walk every group's row tiles, so the tiles in
    # flight mix all experts (kernels/grouped_gemm_ws.py, find_column_band_tile); opt-in: 0.98-0.995 of the
    # expert order's speed on the H200 (session 35)
    "gws_128x256x64_s4_n8d": (128, 256, 64, 4, 0, True, 8),
    "gws_128x256x64_s4_n4d": (128, 256, 64, 4, 0, True, 4),
    # CTA pairs (``_c2``): a row tile's two column tiles side by side, its ``a`` boxes multicast to both
    # (kernels/grouped_gemm_ws.py, CLUSTER_N): the pick for N >= 4096
    "gws_128x256x64_s4_e16d_c2": (128, 256, 64, 4, 16, True, 0, 2),
    # fp8 (``gws8_``: 8-bit operands, K-major weights; BK = 128 bytes): the 16-bit picks' tiles and orders.
    # 128x256 with four stages: 192 KB of ring + the two bf16 C half-tiles (229,440 bytes of the 232,448)
    "gws8_128x256x128_s4_e16d_c2": (128, 256, 128, 4, 16, True, 0, 2),
    "gws8_128x256x128_s4_e16d": (128, 256, 128, 4, 16, True, 0),
    "gws8_128x128x128_s5": (128, 128, 128, 5, 0, False, 0),
    # ... in expert order with the dynamic schedule (opt-in; bf16's `_e8d` ran 0.93 / 0.78 / 0.76 of the pointer
    # tile's time where `gws_128x128x64_s5` ran 0.98 / 0.79 / 0.75 at 64 / 128 / 128 rows an expert: one H100 run)
    "gws8_128x128x128_s5_e8d": (128, 128, 128, 5, 8, True, 0),
}


class GroupedSwapConfig(NamedTuple):
    """A ``GROUPED_SWAP_CONFIGS`` entry: the swapped-tile kernel's tile, ring and expert bands."""
    bw: int                    # weight rows (output columns) a tile: two consumers of bw / 2
    br: int                    # at most this many rows of one group a tile (a multiple of 16)
    bk: int
    stages: int
    expert_group_m: int        # an expert's row tiles walk its column tiles in bands of at most this many
    staging: int = 2           # a consumer's [16, bw / 2] staging buffers of TMA-stored chunks, at most
    cluster_n: int = 1         # 2: CTA pairs on adjacent weight tiles sharing the rows of a (multicast halves)


# name: (BW, BR, BK, stages, expert bands): the swapped-tile kernel (kernels/grouped_gemm_swap.py): out^T = W a^T
# per tile, a group's rows as the wgmma's N, its last tile rounded up to 16 rows (not to 64); K-major weights,
# expert order, the dynamic schedule.  256 x 160 as cuBLAS's swapped tiles for a few hundred rows; four stages of
# 52 KB and the consumers' [16, 128] staging buffers: 229,584 bytes of the 232,448 (229,600 with the tile's expert).
# 128 x 256: the pick's tile turned around, each consumer's products one m64n256 as the pick's are (its per-FLOP
# rate, where 256 x 160's m64n160 pairs ran ~0.87 of the pick's on the H100, session 40); 48 KB stages.  Staging:
# a consumer's chunks take its buffers in turn, each waiting for the TMA stores of the one before it in that buffer;
# eight for 128 x 256 where they fit (229,584 bytes; four for a float32 output), though the H100 (session 41) ran it
# as slowly as with two: 1.19-1.38x the pick's time, bound by its L2 reads (a group's small last tiles read a whole
# weight tile).  _c2_swap: CTA pairs on adjacent weight tiles sharing the rows of a (not yet run on a GPU)
GROUPED_SWAP_CONFIGS = {
    "gws_256x160x64_s4_e16d_swap": (256, 160, 64, 4, 16),
    "gws_256x160x64_s4_e16d_c2_swap": (256, 160, 64, 4, 16, 2, 2),
    "gws_128x256x64_s4_e16d_swap": (128, 256, 64, 4, 16, 8),
    "gws8_128x256x128_s4_e16d_swap": (128, 256, 128, 4, 16, 8),
}


def is_fp8_config(config: str) -> bool:
    """Whether a grouped configuration is one of the 8-bit ones (``g8_`` / ``gws8_``)."""
    return config.startswith(("g8_", "gws8_"))


def swap_config(config: str) -> GroupedSwapConfig:
    """``GROUPED_SWAP_CONFIGS[config]`` as a ``GroupedSwapConfig``."""
    return GroupedSwapConfig(*GROUPED_SWAP_CONFIGS[config])


def ws_schedule_meta(config: str) -> dict:
    """The tile shape, ring and tile order of a ``GROUPED_WS_CONFIGS`` entry as
    ``grouped_gemm_ws_kernel``'s constexprs."""
    c = ws_config(config)
    return {"BM": c.bm, "BN": c.bn, "BK": c.bk, "NUM_STAGES": c.stages, "GROUP_M": c.expert_group_m or GROUP_M,
            "EXPERT_ORDER": c.expert_group_m > 0, "DYNAMIC": c.dynamic, "COLUMN_BANDS": c.column_bands,
            "CLUSTER_N": c.cluster_n}


def ws_config(config: str) -> GroupedWsConfig:
    """``GROUPED_WS_CONFIGS[config]`` as a ``GroupedWsConfig`` (an entry may be a plain tuple)."""
    return GroupedWsConfig(*GROUPED_WS_CONFIGS[config])


_TL_DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float8_e4m3fn: tl.float8e4nv,
              torch.float8_e5m2: tl.float8e5}
# Whether a tile whose group ends within its first BM / 2 rows is split by columns between the two
# consumers (kernels/grouped_gemm_ws.py, split_tail) instead of leaving the second one idle.  Off until
# the H200 has timed it (docs/performance.md, session 26: written, tested on the interpreter and the
# CUDA emulation, not yet run on a GPU); bench/ops_grouped_bench.py times the other value beside the pick
SPLIT_TAILS = False
WS_MAX_GROUPS = 128          # the WS kernel's tile -> group search: a device table, log2(E) loads
# mean rows an expert up to which the choice takes the 256x160 swapped tiles (16-bit operands; choose_grouped_config).
# H100, session 41, E = 8, N = 14336, K = 4096, two runs: 0.974 / 0.976 of the pick's time at 256 rows an expert,
# 1.010 / 1.009 at 512, 1.03-1.05 at 2048: the crossover lies between 256 and 512.  The tiles in CTA pairs sharing
# the rows of a (H100, session 42, time / the unpaired tile's): 0.993 / 0.992 at E = 8, M = 2048, K = 4096 (two runs),
# 1.011 at K = 1024, 0.976 at K = 8192, 0.988 at M = 1024, 0.990 at M = 4096
SWAPPED_TILES_UP_TO = 320
SWAPPED_TILE = "gws_256x160x64_s4_e16d_c2_swap"
CPU_SMS = 132                # on the CPU (interpreter) the persistent grid models an H200


def _ws_layout(a: torch.Tensor, b_experts: torch.Tensor) -> str | None:
    """How the WS kernel's descriptors can read the operands: "kmajor" (``b_experts`` is
    ``w.transpose(1, 2)`` of a contiguous ``[E, N, K]``), "nmajor" (a contiguous ``[E, K, N]``
    with K a multiple of 64), or None (the pointer kernel then)."""
    _, K, N = b_experts.shape
    elt = a.element_size()
    a_ok = (a.stride(1) == 1 and (a.stride(0) * elt) % 16 == 0 and (K * elt) % 16 == 0
            and a.data_ptr() % 16 == 0)
    if not a_ok or b_experts.data_ptr() % 16:
        return None
    if b_experts.transpose(1, 2).is_contiguous():
        return "kmajor"
    if b_experts.is_contiguous() and K % 64 == 0 and (N * elt) % 16 == 0:
        return "nmajor"
    return None


def choose_grouped_config(total_m: int, n_groups: int, n: int, ws_layout: str | None = None,
                          fp8: bool = False, promote: bool = False, glu: bool = False) -> str:
    """Groups of 64 rows or more on average (at most 128 groups) whose operands TMA can read: the
    warp-specialized kernel.  From 256 rows an expert, 128x256 tiles in expert order with the dynamic
    schedule when N >= 4096 (H200 2026-12-04, E = 8, N = 14336: 1.06-1.10x the static grouped order), in
    CTA pairs sharing ``a`` (H100 2026-12-06, three runs: 1.026-1.031x at M = 2048, 1.009-1.020x at 4096,
    0.999-1.018x at 16384; not yet timed on the H200), else 128x128; from 64 rows an expert 128x128 (H100,
    session 38, against the pointer kernel with its wgmmas no longer serialized: at E = 128 / 64 / 32 with 64 /
    128 / 128 rows an expert, 0.99 / 0.83 / 0.78 of the 64-row pointer tile's time in bf16; at 32-36 rows an
    expert the two are equal; fp8's 0.88 / 0.76 are session 37's, against the serialized pointer tile).
    Otherwise the pointer kernel: 64-row tiles when the
    mean group is under 256 rows (less padding in each group's last tile), 128 otherwise; 256 columns when
    N is large enough to fill the SMs anyway.  fp8 takes the ``gws8_`` / ``g8_`` tiles of the same choice
    (the WS kernel reads 8-bit weights K-major only); promoted sums (``promote``: ``use_fast_accum=False``)
    no 256-wide tile.  The swapped tiles ``SWAPPED_TILE`` where the mean group has at most
    ``SWAPPED_TILES_UP_TO`` rows (16-bit K-major weights, N >= 4096, no GLU pairs): a group's last tile pads to
    16 rows, not 64 (H100, session 41: 0.974-0.976x the pick's time at E = 8, 256 rows an expert; fp8's swapped
    tiles never ran ahead of its pick), in CTA pairs sharing ``a`` (H100, session 42: 0.976-1.011x the unpaired
    tiles' time)."""
    swapped = ws_layout == "kmajor" and n >= 4096 and not glu and not fp8 and n_groups <= WS_MAX_GROUPS
    if swapped and total_m <= SWAPPED_TILES_UP_TO * n_groups:
        return SWAPPED_TILE
    readable = ws_layout == "kmajor" if fp8 else ws_layout is not None
    if readable and n_groups <= WS_MAX_GROUPS and total_m >= 64 * n_groups:
        pair = n >= 4096 and total_m >= 256 * n_groups and not promote
        if fp8:
            return "gws8_128x256x128_s4_e16d_c2" if pair else "gws8_128x128x128_s5"
        return "gws_128x256x64_s4_e16d_c2" if pair else "gws_128x128x64_s5"
    if fp8:
        return "g8_64x128x128" if total_m < 256 * n_groups else "g8_128x128x128"
    if total_m < 256 * n_groups:
        return "g_64x128x64"
    return "g_128x256x64" if n >= 4096 else "g_128x128x64"


def _check_types(op: str, out_dtype, **tensors) -> None:
    """Each named argument a tensor, ``out_dtype`` None or one of ``OUT_DTYPES``."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: '{name}' must be a tensor, got {type(t).__name__}")
    if out_dtype is not None and out_dtype not in OUT_DTYPES:
        raise ValueError(f"{op}: 'out_dtype' must be one of {OUT_DTYPES} or None, got {out_dtype}")


def _check_operands(op: str, x: torch.Tensor, y: torch.Tensor, group_sizes: torch.Tensor,
                    experts: int | None = None, fp8: bool = False) -> None:
    """The rules both grouped products share: two bf16 or two fp16 operands (or, ``fp8``, two of
    the same 8-bit float type), ``group_sizes`` an int32/int64 vector (of ``experts`` entries where
    the weights say how many), one device."""
    allowed = (torch.bfloat16, torch.float16) + (FP8_DTYPES if fp8 else ())
    if x.dtype not in allowed or y.dtype != x.dtype:
        raise ValueError(f"{op}: operands must be both bfloat16 or both float16"
                         f"{', or both float8_e4m3fn or both float8_e5m2' if fp8 else ''}, got {x.dtype} and {y.dtype}")
    if group_sizes.dim() != 1 or group_sizes.dtype not in (torch.int32, torch.int64) or \
            (experts is not None and group_sizes.shape[0] != experts):
        raise ValueError(f"{op}: 'group_sizes' must be an int32/int64 vector"
                         f"{f' of {experts} elements' if experts is not None else ''}, got {group_sizes.dtype} of "
                         f"shape {tuple(group_sizes.shape)}")
    if x.device != y.device or group_sizes.device != x.device:
        raise ValueError(f"{op}: tensors on {x.device}, {y.device} and {group_sizes.device}")


def _epilogue_args(bias, activation, E: int, N: int, device) -> tuple:
    """``(bias, stride_bias, BIAS_DIM, ACTIVATION, output columns)`` of the grouped kernels'
    epilogue: ``bias`` ``[E, N]`` (a row per expert) or ``[N]`` (shared: stride 0), float;
    ``activation`` one of ``epilogue.ACTIVATIONS`` (GLU pairs halve the columns)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"tlxc.ops.grouped_matmul: 'activation' must be one of "
                         f"{[k for k in ACTIVATIONS if k]} or None, got {activation!r}")
    code = ACTIVATIONS[activation]
    if code >= GLU_FIRST and N % 2:
        raise ValueError(f"tlxc.ops.grouped_matmul: activation {activation!r} pairs columns (gate 2j, up 2j + 1): "
                         f"N must be even, got {N}")
    n_out = N // 2 if code >= GLU_FIRST else N
    if bias is None:
        return None, 0, -1, code, n_out
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point() or bias.device != device or \
            tuple(bias.shape) not in ((E, N), (N,)):
        raise ValueError(f"tlxc.ops.grouped_matmul: 'bias' must be a float tensor of shape ({E}, {N}) (one row per "
                         f"expert) or ({N},) on {device}, got "
                         f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__}"
                         f"{' ' + str(bias.dtype) + ' on ' + str(bias.device) if isinstance(bias, torch.Tensor) else ''}")
    if bias.stride(-1) != 1:
        bias = bias.contiguous()
    return bias, bias.stride(0) if bias.dim() == 2 else 0, 1, code, n_out


def _scale_args(scale_a, scale_b, M: int, E: int, N: int, device) -> dict:
    """The kernels' scale arguments (``epilogue.py``'s codes): ``scale_a`` float32 of one element or
    ``M`` (one per row of ``a``: ``SCALE0`` 1 or 2); ``scale_b`` float32 of one element (every expert:
    stride 0), ``E`` (``[E]`` or ``[E, 1]``: one per expert) or ``[E, N]`` (one per expert and column),
    as ``SCALE1`` with the stride between experts' scales.  Empty when neither is given."""
    args = {}
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s is not None and (not isinstance(s, torch.Tensor) or s.dtype != torch.float32 or s.device != device):
            raise ValueError(f"tlxc.ops.grouped_matmul: '{name}' must be a float32 tensor on {device}, got "
                             f"{getattr(s, 'dtype', type(s).__name__)}"
                             f"{' on ' + str(s.device) if isinstance(s, torch.Tensor) else ''}")
    if scale_a is not None:
        if scale_a.numel() == 1:
            args.update(scale0_ptr=scale_a.reshape(1), SCALE0=1)
        elif scale_a.numel() == M and (scale_a.dim() == 1 or (scale_a.dim() == 2 and scale_a.shape[1] == 1)):
            args.update(scale0_ptr=scale_a.reshape(M).contiguous(), SCALE0=2)
        else:
            raise ValueError(f"tlxc.ops.grouped_matmul: 'scale_a' must have one element or one per row of a ({M}), "
                             f"got shape {tuple(scale_a.shape)}")
    if scale_b is not None:
        shape = tuple(scale_b.shape)
        if scale_b.numel() == 1:
            args.update(scale1_ptr=scale_b.reshape(1), stride_scale1=0, SCALE1=1)
        elif shape in ((E,), (E, 1)):
            args.update(scale1_ptr=scale_b.reshape(E).contiguous(), stride_scale1=1, SCALE1=1)
        elif shape in ((E, N), (E, 1, N)):
            args.update(scale1_ptr=scale_b.reshape(E, N).contiguous(), stride_scale1=N, SCALE1=2)
        else:
            raise ValueError(f"tlxc.ops.grouped_matmul: 'scale_b' must have one element, one per expert ({E},) or "
                             f"one per expert and column ({E}, {N}), got shape {shape}")
    return args


def grouped_matmul(a: torch.Tensor, b_experts: torch.Tensor, group_sizes: torch.Tensor, out: torch.Tensor | None = None,
                   *, bias: torch.Tensor | None = None, activation: str | None = None,
                   out_dtype: torch.dtype | None = None, config: str | None = None,
                   scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
                   use_fast_accum: bool = True) -> torch.Tensor:
    """``out[rows of g] = activation(a[rows of g] @ b_experts[g] * scale_a * scale_b[g] + bias[g])``
    (module docstring; ``bias`` ``[E, N]`` or ``[N]``, ``activation`` as ``tlxc.ops.matmul``'s: relu,
    gelu, gelu_tanh, silu, or the GLU pairs swiglu / geglu, whose output has N / 2 columns; the
    scales as ``torch._scaled_grouped_mm``'s, for fp8 operands above all).  ``use_fast_accum`` (fp8,
    as ``torch._scaled_mm``'s): True sums every product in the wgmma accumulator; False adds each
    128-byte k-step's products to the sum in float32 (128x128 tiles: ``gws8_128x128x128_*`` or the
    pointer kernel; 16-bit operands always sum in float32)."""
    _check_types("tlxc.ops.grouped_matmul", out_dtype, a=a, b_experts=b_experts, group_sizes=group_sizes)
    if not isinstance(use_fast_accum, bool):
        raise TypeError(f"tlxc.ops.grouped_matmul: use_fast_accum must be a bool, got {use_fast_accum!r}")
    if out is not None and (not isinstance(out, torch.Tensor) or out.dtype not in OUT_DTYPES):
        raise ValueError(f"tlxc.ops.grouped_matmul: 'out' must be a tensor of one of {OUT_DTYPES}, got "
                         f"{getattr(out, 'dtype', type(out).__name__)}")
    if a.dim() != 2 or b_experts.dim() != 3 or a.shape[1] != b_experts.shape[1]:
        raise ValueError(f"tlxc.ops.grouped_matmul expects a [total_M, K] and b_experts [E, K, N], got "
                         f"{tuple(a.shape)} and {tuple(b_experts.shape)}")
    E, K, N = b_experts.shape
    _check_operands("tlxc.ops.grouped_matmul", a, b_experts, group_sizes, E, fp8=True)
    fp8 = a.dtype in FP8_DTYPES
    promote = fp8 and not use_fast_accum
    M = a.shape[0]
    bias, stride_bias, bias_dim, act, n_out = _epilogue_args(bias, activation, E, N, a.device)
    scales = _scale_args(scale_a, scale_b, M, E, N, a.device)
    out_dtype = out_dtype or (out.dtype if out is not None else (torch.bfloat16 if fp8 else a.dtype))
    if out is None:
        out = torch.empty((M, n_out), device=a.device, dtype=out_dtype)
    elif tuple(out.shape) != (M, n_out) or out.dtype != out_dtype or out.device != a.device:
        raise ValueError(f"tlxc.ops.grouped_matmul: 'out' must be a ({M}, {n_out}) {out_dtype} tensor on {a.device}, "
                         f"got {tuple(out.shape)} {out.dtype} on {out.device}")
    if M == 0 or N == 0:
        return out
    epilogue = dict(scales)             # (only what is used: the default launch as before)
    if bias_dim >= 0 or act:
        epilogue.update(bias_ptr=bias, stride_bias=stride_bias, BIAS_DIM=bias_dim, ACTIVATION=act)
    if promote:
        epilogue["PROMOTE"] = True
    layout = _ws_layout(a, b_experts)
    if fp8 and not (a.stride(1) == 1 and b_experts.stride(1) == 1):
        raise ValueError(f"tlxc.ops.grouped_matmul: fp8 operands must be K-major (wgmma reads 8-bit operands "
                         f"K-major): 'a' with unit column stride, 'b_experts' as w.transpose(1, 2) of [E, N, K] "
                         f"weights; got strides {tuple(a.stride())} and {tuple(b_experts.stride())}")
    if config is None:
        config = choose_grouped_config(M, E, N, layout, fp8, promote, act >= GLU_FIRST)
    if config not in GROUPED_WS_CONFIGS and config not in GROUPED_CONFIGS and config not in GROUPED_SWAP_CONFIGS:
        raise ValueError(f"tlxc.ops.grouped_matmul: unknown config {config!r} (one of "
                         f"{sorted(GROUPED_CONFIGS) + sorted(GROUPED_WS_CONFIGS) + sorted(GROUPED_SWAP_CONFIGS)})")
    if is_fp8_config(config) != fp8:
        raise ValueError(f"tlxc.ops.grouped_matmul: config {config!r} runs "
                         f"{'fp8' if is_fp8_config(config) else '16-bit'} operands, got {a.dtype}")
    if promote and config in GROUPED_WS_CONFIGS and ws_config(config).bn > 128:
        raise ValueError(f"tlxc.ops.grouped_matmul: use_fast_accum=False keeps a second accumulator of the tile's "
                         f"width: tiles up to 128 columns (e.g. 'gws8_128x128x128_s5'), got {config!r}")
    if config in GROUPED_SWAP_CONFIGS:
        if layout != "kmajor":
            raise ValueError(f"tlxc.ops.grouped_matmul: config {config!r} reads the operands by TMA with the weights "
                             f"as wgmma's A: 'a' needs unit column stride and 16-byte aligned rows, 'b_experts' must "
                             f"be w.transpose(1, 2) of a contiguous [E, N, K]")
        if act >= GLU_FIRST:
            raise ValueError(f"tlxc.ops.grouped_matmul: config {config!r} does not pair columns: activation "
                             f"{activation!r} takes a 'gws_' configuration (or config=None)")
        if promote:
            raise ValueError(f"tlxc.ops.grouped_matmul: config {config!r} sums the products in the wgmma accumulator "
                             f"(use_fast_accum=True); use_fast_accum=False takes e.g. 'gws8_128x128x128_s5'")
        _launch_swap(config, a, b_experts, group_sizes, out, epilogue)
        return out
    if config in GROUPED_WS_CONFIGS:
        if layout is None or (fp8 and layout != "kmajor"):
            raise ValueError(f"tlxc.ops.grouped_matmul: config {config!r} reads the operands by TMA: 'a' needs unit "
                             f"column stride and 16-byte aligned rows, 'b_experts' must be w.transpose(1, 2) of a "
                             f"contiguous [E, N, K]{'' if fp8 else ' or a contiguous [E, K, N] with K a multiple of 64'}")
        _launch_ws(config, a, b_experts, group_sizes, out, layout == "kmajor", epilogue)
        return out
    bm, bn, bk, warps, stages = GROUPED_CONFIGS[config]
    row_tiles = -(-M // bm) + E                 # each group's last row tile may be partial
    grid = (row_tiles * -(-N // bn),)
    _check_sizes(group_sizes, M)
    grouped_gemm_kernel[grid](a, b_experts, out, group_sizes, M, E, N, K, a.stride(0), a.stride(1), b_experts.stride(0),
                              b_experts.stride(1), b_experts.stride(2), out.stride(0), out.stride(1), row_tiles,
                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, E_PAD=_pow2(E),
                              ALIGNS=grouped_aligns(N, K, a, b_experts, out), num_warps=warps, num_stages=stages,
                              **epilogue)
    return out


def grouped_aligns(N: int, K: int, a, b_experts, out) -> tuple:
    """``ALIGNS`` of ``grouped_gemm_kernel``: ``matmul.dot_aligns``'s facts of the strides
    ``(am, ak, bk, bn, cm, cn)``, N and K (none of M: the groups' rows end anywhere), then the
    expert stride's."""
    facts = dot_aligns(1, N, K, (a.stride(0), a.stride(1), b_experts.stride(1), b_experts.stride(2),
                                 out.stride(0), out.stride(1)), 1)
    return (*facts[:6], facts[7], facts[8], align_fact(b_experts.stride(0)))


GROUP_M = 8          # row tiles that walk the column tiles together (L2 reuse of a and b)
TAIL_ROWS = 32       # group_table_kernel's zeros of the rows past the groups' sum: rows a step,
TAIL_PROGRAMS = 64   # and at most this many programs beside the table's
# the TMA kernels with a dynamic schedule as programmatic dependent launches (PDL) of the group table kernel: they
# start while it runs and wait for its memory (gdc_wait) before they read anything.  H100, session 41 (the bench's
# "+no_pdl" column): the dynamic kernels 0.3-1.8 % faster with it (E = 8); the static ones (gws_128x128x64_s5 at
# E = 32-128) 0-10 % slower, where the bench's host time per call was as long as the kernel's: those, and the weight
# gradient's static kernel after the sizes' check, are plain launches (docs/performance.md).  False: none is
PDL_LAUNCHES = True


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def ws_shared_bytes(config: str, elt: int, out_elt: int, c_tma: bool, with_group: bool = False) -> int:
    """The WS grouped kernel's shared memory: the ring, the consumers' half-tile C buffers
    (TMA stores only) and the barriers (gws_128x256x64_s4: 196672 bytes with pointer stores,
    229440 with a bf16 C tile); ``with_group``: the dynamic schedule's slots carry the tile's
    expert too (a per-expert bias)."""
    c = ws_config(config)
    used = c.stages * (c.bm * c.bk + c.bn * c.bk) * elt + (c.bm * (c.bn // 2) * out_elt if c_tma else 0) + \
        16 * c.stages
    if c.dynamic:               # the tile ring (2 x 4 or 5 int32 at a 128-byte boundary) and its 4 barriers,
        used = -(-used // 128) * 128 + (40 if with_group else 32) + 32
        if c.cluster_n > 1:     # a pair's mailbox (2 int32 at a 128-byte boundary) and its 4 barriers,
            used = -(-used // 128) * 128 + 8 + 32
        used = -(-used // 16) * 16 + 16     # the 16 bytes that broadcast the drawn index
    return used


def swap_shared_bytes(config: str, elt: int, out_elt: int, c_tma: bool, with_group: bool = False,
                      staging: int | None = None) -> int:
    """The swapped-tile kernel's shared memory: the consumers' staging buffers (``staging`` ``[16, BW / 2]`` each
    with TMA stores, default the configuration's; one without), the ring, its barriers and the dynamic
    schedule's tile ring."""
    c = swap_config(config)
    used = 2 * ((staging or c.staging) if c_tma else 1) * 16 * (c.bw // 2) * out_elt
    used = -(-used // 1024) * 1024 + c.stages * (c.bw + c.br) * c.bk * elt + 16 * c.stages
    used = -(-used // 128) * 128 + (40 if with_group else 32) + 32
    if c.cluster_n > 1:         # a pair's mailbox (2 int32 at a 128-byte boundary) and its 4 barriers
        used = -(-used // 128) * 128 + 8 + 32
    return -(-used // 16) * 16 + 16


def swap_staging(config: str, a, out, with_group: bool = False) -> int:
    """The staging buffers a consumer of the swapped-tile kernel TMA-stores its 16-row chunks through: the
    configuration's count, halved until they fit beside the ring (a float32 output: half as many), at least
    two; 0 where an output TMA cannot store or two do not fit (one buffer each, pointer stores)."""
    if out.dtype not in TL_DTYPES or not _tma_stores(out):
        return 0
    staging = swap_config(config).staging
    while staging > 2 and swap_shared_bytes(config, a.element_size(), out.element_size(), True, with_group,
                                            staging) > SHARED_LIMIT:
        staging //= 2
    fits = swap_shared_bytes(config, a.element_size(), out.element_size(), True, with_group, staging) <= SHARED_LIMIT
    return staging if fits else 0


def swap_stores_by_tma(config: str, a, out, with_group: bool = False) -> bool:
    """Whether the swapped-tile kernel TMA-stores the 16-row chunks inside a group (``swap_staging``)."""
    return swap_staging(config, a, out, with_group) > 0


def ws_stores_by_tma(config: str, a, out, with_group: bool = False) -> bool:
    """Whether the WS kernel TMA-stores the row blocks inside their group: an output TMA can
    store through (``matmul._tma_stores``) whose C tile fits beside the ring (a float32 output
    of 128x256 tiles does not: pointer stores then) and of a dtype the C tile can hold."""
    fits = ws_shared_bytes(config, a.element_size(), out.element_size(), True, with_group) <= SHARED_LIMIT
    return out.dtype in TL_DTYPES and _tma_stores(out) and fits


def _launch_ws(config: str, a, b_experts, group_sizes, out, b_kmajor: bool, epilogue: dict | None = None) -> None:
    meta = ws_schedule_meta(config)
    bm, bn, bk = meta["BM"], meta["BN"], meta["BK"]
    E, K, N = b_experts.shape
    M = a.shape[0]
    epilogue = epilogue or {}
    box_cols = 128 // a.element_size()                 # one 128-byte swizzle span
    # GLU pairs store half the columns: through pointers (a C box of the product's columns does not apply)
    with_group = epilogue.get("BIAS_DIM", -1) == 1 or epilogue.get("SCALE1", 0) > 0    # (the kernel's WITH_GROUP)
    c_tma = ws_stores_by_tma(config, a, out, with_group) and epilogue.get("ACTIVATION", 0) < GLU_FIRST
    c_box_n = 128 // out.element_size()
    c_desc = TensorDescriptor.from_tensor(out, [bm // 2, c_box_n], swizzle=128) if c_tma else None
    a_desc = TensorDescriptor.from_tensor(a, [bm // 2, bk], swizzle=128)
    if b_kmajor:                                       # [E * N, K]: expert g's rows from g * N
        b_desc = TensorDescriptor.from_tensor(b_experts.transpose(1, 2).reshape(E * N, K), [bn, bk], swizzle=128)
    else:                                              # [E * K, N]: expert g's rows from g * K
        b_desc = TensorDescriptor.from_tensor(b_experts.reshape(E * K, N), [bk, box_cols], swizzle=128)
    row_tiles = -(-M // bm) + E
    pair = meta["CLUSTER_N"]
    tiles = row_tiles * -(-N // (bn * pair))           # (a CTA pair's: pairs of column tiles)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.device.type == "cuda" else CPU_SMS
    progs = max(1, min(sms // pair, tiles)) * pair
    e_pad = _pow2(E)
    table = torch.empty(2 * e_pad + 1, device=a.device, dtype=torch.int32)
    tail_programs = min(-(-M // TAIL_ROWS), TAIL_PROGRAMS)
    pdl = PDL_LAUNCHES and meta["DYNAMIC"]
    group_table_kernel[(1 + tail_programs,)](group_sizes, table, out, M, E, out.shape[1], out.stride(0), out.stride(1),
                                             BM=bm, E_PAD=e_pad, TAIL_ROWS=TAIL_ROWS, PDL=pdl, num_warps=4)
    grouped_gemm_ws_kernel[(progs,)](a_desc, b_desc, out, c_desc, table, E, N, K, row_tiles, progs, out.stride(0),
                                     out.stride(1), **meta, DTYPE=_TL_DTYPES[a.dtype], B_KMAJOR=b_kmajor,
                                     B_BOX_N=box_cols, E_PAD=e_pad,
                                     SEARCH_STEPS=E.bit_length(), C_TMA=c_tma,
                                     OUT_DTYPE=TL_DTYPES[out.dtype] if c_tma else None, C_BOX_N=c_box_n,
                                     SPLIT_TAIL=SPLIT_TAILS and pair == 1, num_warps=4,
                                     ctas_per_cga=(pair, 1, 1) if pair > 1 else None, launch_pdl=pdl,
                                     **epilogue)


def _launch_swap(config: str, a, b_experts, group_sizes, out, epilogue: dict) -> None:
    c = swap_config(config)
    E, K, N = b_experts.shape
    M = a.shape[0]
    with_group = epilogue.get("BIAS_DIM", -1) == 1 or epilogue.get("SCALE1", 0) > 0    # (the kernel's WITH_GROUP)
    staging = swap_staging(config, a, out, with_group)
    c_tma = staging > 0
    c_box_n = 128 // out.element_size()
    c_desc = TensorDescriptor.from_tensor(out, [16, c_box_n], swizzle=128) if c_tma else None
    w_desc = TensorDescriptor.from_tensor(b_experts.transpose(1, 2).reshape(E * N, K), [c.bw, c.bk], swizzle=128)
    a_desc = TensorDescriptor.from_tensor(a, [16, c.bk], swizzle=128)             # a group's last tile
    pair = c.cluster_n
    a_tile_desc = TensorDescriptor.from_tensor(a, [c.br // pair, c.bk], swizzle=128)  # a whole tile (a pair: halves)
    tiles = (-(-M // c.br) + E) * -(-N // (c.bw * pair))                            # (a pair's)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.device.type == "cuda" else CPU_SMS
    progs = max(1, min(sms // pair, tiles)) * pair
    e_pad = _pow2(E)
    table = torch.empty(2 * e_pad + 1, device=a.device, dtype=torch.int32)
    tail_programs = min(-(-M // TAIL_ROWS), TAIL_PROGRAMS)
    group_table_kernel[(1 + tail_programs,)](group_sizes, table, out, M, E, out.shape[1], out.stride(0), out.stride(1),
                                             BM=c.br, E_PAD=e_pad, TAIL_ROWS=TAIL_ROWS, PDL=PDL_LAUNCHES, num_warps=4)
    grouped_gemm_swap_kernel[(progs,)](w_desc, a_desc, a_tile_desc, out, c_desc, table, E, N, K, progs, out.stride(0),
                                       out.stride(1), BW=c.bw,
                                       BR=c.br, BK=c.bk, GROUP_M=c.expert_group_m, NUM_STAGES=c.stages,
                                       DTYPE=_TL_DTYPES[a.dtype], E_PAD=e_pad, SEARCH_STEPS=E.bit_length(),
                                       OUT_DTYPE=TL_DTYPES[out.dtype], C_TMA=c_tma, C_BOX_N=c_box_n,
                                       C_STAGING=max(staging, 2), CLUSTER_N=pair, num_warps=4,
                                       ctas_per_cga=(pair, 1, 1) if pair > 1 else None, launch_pdl=PDL_LAUNCHES,
                                       **epilogue)


WGRAD_CONFIGS = {           # name: (BLOCK_K, BLOCK_N, BLOCK_M (rows a step), warps, stages): grouped_wgrad_kernel
    "w_128x128x64_w8_s3": (128, 128, 64, 8, 3),
    "w_128x256x64_w8_s3": (128, 256, 64, 8, 3),
    "w_256x128x64_w8_s3": (256, 128, 64, 8, 3),
    "w_128x128x64_w4_s4": (128, 128, 64, 4, 4),
    "w_128x128x32_w8_s4": (128, 128, 32, 8, 4),
}
WGRAD_DEFAULT = "w_128x256x64_w8_s3"     # H200 2026-12-04: 0.81-0.98 of 128x128's time (6 MoE shapes)
# the default where TMA can read 16-bit `a` and `grad` as they are: H100 2026-12-06, the bench's seven MoE cases
# (session 38, after the grouped kernels' wgmmas were unserialized): 0.65-0.78 of the pointer default's time,
# 1.007-1.069x a cuBLAS loop at E = 8; `wws_128x128x64_s6` 0.95-1.41x its time (docs/performance.md)
WGRAD_WS_DEFAULT = "wws_128x256x64_s4"
# name: (BM (K-rows of a tile), BN, BR (rows a k-step), stages): grouped_wgrad_ws_kernel, the warp-specialized
# TMA kernel (session 37; GPU-run on the H100 in session 38)
WGRAD_WS_CONFIGS = {
    "wws_128x256x64_s4": (128, 256, 64, 4),
    "wws_128x128x64_s6": (128, 128, 64, 6),
}


def _check_sizes(group_sizes: torch.Tensor, M: int) -> None:
    """The sizes' device check (non-negative, adding up to at most ``M``) as a launch of its own, before a
    kernel with wgmma that takes them unchecked (an assertion there serializes its wgmmas, ptxas C7510)."""
    E = group_sizes.shape[0]
    check_sizes_kernel[(1,)](group_sizes, E, M, E_PAD=_pow2(E), num_warps=4)


def _launch_wgrad_ws(config: str, a, grad, group_sizes, out) -> None:
    bm, bn, br, stages = WGRAD_WS_CONFIGS[config]
    E, K, N = out.shape
    M = a.shape[0]
    box = 128 // a.element_size()                       # one 128-byte swizzle span
    a_desc = TensorDescriptor.from_tensor(a, [br, bm // 2], swizzle=128)
    g_desc = TensorDescriptor.from_tensor(grad, [br, box], swizzle=128)
    # TMA stores of each consumer's half-tiles: a 16-bit output whose experts' K rows are whole tiles
    c_tma = out.dtype in (torch.bfloat16, torch.float16) and K % bm == 0 and (N * out.element_size()) % 16 == 0
    c_desc = TensorDescriptor.from_tensor(out.view(E * K, N), [bm // 2, box], swizzle=128) if c_tma else None
    tiles = E * -(-K // bm) * -(-N // bn)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.device.type == "cuda" else CPU_SMS
    progs = max(1, min(sms, tiles))
    _check_sizes(group_sizes, M)
    grouped_wgrad_ws_kernel[(progs,)](a_desc, g_desc, c_desc, out, group_sizes, M, E, K, N, progs, out.stride(0),
                                      out.stride(1), out.stride(2), BM=bm, BN=bn, BR=br, NUM_STAGES=stages,
                                      GROUP_M=GROUP_M, DTYPE=_TL_DTYPES[a.dtype], E_PAD=_pow2(E), C_TMA=c_tma,
                                      OUT_DTYPE=TL_DTYPES[out.dtype] if c_tma else None, B_BOX_N=box, num_warps=4)


def grouped_weight_grad(a: torch.Tensor, grad: torch.Tensor, group_sizes: torch.Tensor,
                        out_dtype: torch.dtype | None = None, config: str | None = None) -> torch.Tensor:
    """``db[g] = a[rows of g]ᵀ @ grad[rows of g]``, ``[E, K, N]`` (contiguous, ``out_dtype`` or
    ``a``'s dtype): the weight gradient of ``grouped_matmul`` (float32 accumulation, no host sync; a
    group of no rows gets zeros).  ``config``: one of
    ``WGRAD_WS_CONFIGS`` (the warp-specialized TMA kernel, ``kernels/grouped_wgrad_ws.py``: operands
    TMA can read as they are; ``WGRAD_WS_DEFAULT`` by default for such 16-bit operands) or
    ``WGRAD_CONFIGS`` (the pointer kernel, any strides; ``WGRAD_DEFAULT`` by default otherwise)."""
    _check_types("tlxc.ops.grouped_weight_grad", out_dtype, a=a, grad=grad, group_sizes=group_sizes)
    if config is not None and config not in WGRAD_CONFIGS and config not in WGRAD_WS_CONFIGS:
        raise ValueError(f"tlxc.ops.grouped_weight_grad: unknown config {config!r} (one of "
                         f"{sorted(WGRAD_CONFIGS) + sorted(WGRAD_WS_CONFIGS)})")
    if a.dim() != 2 or grad.dim() != 2 or a.shape[0] != grad.shape[0]:
        raise ValueError(f"tlxc.ops.grouped_weight_grad expects a [total_M, K] and grad [total_M, N], got "
                         f"{tuple(a.shape)} and {tuple(grad.shape)}")
    _check_operands("tlxc.ops.grouped_weight_grad", a, grad, group_sizes)
    E, (M, K), N = group_sizes.shape[0], a.shape, grad.shape[1]
    out = torch.empty((E, K, N), device=a.device, dtype=out_dtype or a.dtype)
    if out.numel() == 0:
        return out
    if M == 0:
        return out.zero_()
    if config is None and a.dtype in (torch.bfloat16, torch.float16) and _tma_rows(a) and _tma_rows(grad):
        config = WGRAD_WS_DEFAULT
    if config in WGRAD_WS_CONFIGS:
        if not (_tma_rows(a) and _tma_rows(grad)):
            raise ValueError(f"tlxc.ops.grouped_weight_grad: config {config!r} reads 'a' and 'grad' by TMA: unit "
                             f"column strides, 16-byte aligned rows of at least 16 bytes; got strides "
                             f"{tuple(a.stride())} and {tuple(grad.stride())}")
        _launch_wgrad_ws(config, a, grad, group_sizes, out)
        return out
    bk, bn, bm, warps, stages = WGRAD_CONFIGS[config or WGRAD_DEFAULT]
    grid = (E * -(-K // bk) * -(-N // bn),)
    _check_sizes(group_sizes, M)
    grouped_wgrad_kernel[grid](a, grad, out, group_sizes, M, E, K, N, a.stride(0), a.stride(1), grad.stride(0),
                               grad.stride(1), out.stride(0), out.stride(1), out.stride(2), BLOCK_K=bk, BLOCK_N=bn,
                               BLOCK_M=bm, E_PAD=_pow2(E), num_warps=warps, num_stages=stages)
    return out

