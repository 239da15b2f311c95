"""``from tlxc.language import tlx``: TLX's orchestration layer.

Warp-group tasks, shared-memory buffers, mbarriers, named barriers, fences and
cp.async copies, with TLX's names, signatures and semantics
(``shared/reference/tlx_api.md`` §1.1–1.4, §2), so that a TLX kernel ports by
changing its imports.  Like ``tl.*``, every function is a builtin that only
works inside a ``@tlxc.kernel``.
"""
from __future__ import annotations

import enum
import functools

from ..core import float32, outside_kernel_error

TLX_BUILTINS: dict[str, object] = {}


def builtin(fn):
    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"tlx.{fn.__name__}")

    outside_kernel.__tlxc_builtin__ = "tlx." + fn.__name__
    outside_kernel.__tlxc_signature__ = fn
    TLX_BUILTINS[fn.__name__] = outside_kernel
    return outside_kernel


class storage_kind(enum.Enum):
    smem = "smem"
    tmem = "tmem"
    smemCluster = "smemCluster"


# -- tasks ----------------------------------------------------------------------
class async_tasks:
    """``with tlx.async_tasks():`` opens a warp-specialized region; its body holds
    only ``with tlx.async_task(...)`` blocks (optionally under ``if CONSTEXPR:``)."""

    def __init__(self, *, exclusive=False, no_ending_cluster_sync=False, mbarrier_try_wait_suspend_ns=None):
        raise outside_kernel_error("tlx.async_tasks")


class async_task:
    """``with tlx.async_task("default"):`` (the kernel's ``num_warps``) or
    ``with tlx.async_task(num_warps=N, registers=R, replicate=K):``."""

    def __init__(self, *args, num_warps=None, num_regs=None, registers=None, replicate=1,
                 warp_group_start_id=None):
        raise outside_kernel_error("tlx.async_task")


class warp_pipeline_stage:
    """``with tlx.warp_pipeline_stage("label", priority=P):`` inside a loop body marks one stage
    of an AMD warp pipeline ("ping-pong"): the work-group's waves run as two groups one stage
    apart, meeting at a barrier after every stage; ``priority`` 0..3 is the stage's ``s_setprio``.
    AMD targets only (an error elsewhere, as in TLX).  The stages do not order shared memory by
    themselves: a value one group writes is safe to read in the other group two stages later
    (docs/codegen.md, "Warp-pipeline stages")."""

    def __init__(self, label=None, *, priority=None):
        raise outside_kernel_error("tlx.warp_pipeline_stage")


@builtin
def amd_sched_barrier(mask=0):
    """An AMD scheduling fence (``sched_barrier``): the compiler moves no instruction of a class
    whose bit of ``mask`` is clear across it (0: none; bits 0..10 as LLVM's
    ``llvm.amdgcn.sched.barrier``).  Not a barrier of work-items and not a memory fence; no
    instruction.  AMD targets only."""


@builtin
def async_task_replica_id():
    """The replica index (compile-time) inside a replicated task."""


# -- shared memory -----------------------------------------------------------------
@builtin
def local_alloc(shape, dtype, num, storage=storage_kind.smem, reuse=None, layout=None):
    """``num`` buffers of ``shape`` x ``dtype`` in shared memory."""


@builtin
def local_view(buf, idx):
    """Buffer (or barrier) ``idx`` of an array; also spelled ``buf[idx]``."""


@builtin
def local_slice(buf, offset, shape):
    """A sub-buffer of the same rank at ``offset`` (runtime offsets allowed)."""


@builtin
def local_trans(buf, dims=(1, 0)):
    """A permuted view, no data movement."""


@builtin
def local_reshape(buf, shape):
    """The same shared-memory elements in another shape, row-major as ``tl.reshape`` orders them (TLX's
    ``memdesc_reshape``), no data movement: one buffer of consecutive elements (not a transposed,
    sliced or explicitly laid out view)."""


@builtin
def local_reinterpret(buf, dtype, shape=None, layout=None, pin=True):
    """The same bytes with another dtype (and shape), or (``layout=``) seen through an
    explicit shared layout that must describe the same bytes (docs/language.md)."""


class reuse_group_type(enum.Enum):
    """How the children of a ``tlx.reuse_group`` share their region: at the same offset
    (``shared``) or one after another (``distinct``)."""
    shared = "shared"
    distinct = "distinct"


@builtin
def storage_alias_spec(storage=storage_kind.smem, buffer_size_bytes=None):
    """A shared-memory region whose peers are the ``local_alloc(..., reuse=spec)`` allocations;
    ``spec.set_buffer_overlap(tlx.reuse_group(...))`` declares how they overlap
    (``frontend/storage_alias.py``)."""


@builtin
def reuse_group(*elements, group_type=reuse_group_type.shared, group_size=1):
    """A node of an overlap tree: allocations of one storage_alias_spec and sub-groups;
    ``group_size=K`` makes K consecutive buffers of a child one slot (subtiling)."""


@builtin
def set_buffer_overlap(spec, overlap):
    """Declare ``spec``'s overlap scheme (also ``spec.set_buffer_overlap(overlap)``); once per
    spec, after its allocations and before any of them is indexed."""


def nv_mma_shared_layout_encoding(shape, order, elemType, numCTAsPerCGA, numCTASplit, numCTAOrder,
                                  fp4Padded=False, swizzled=True):
    """TLX's NVMMA shared layout (the one wgmma and TMA read), a compile-time value for
    ``local_alloc(..., layout=)`` / ``local_reinterpret(..., layout=)``; ``shape`` is the
    atom that selects the swizzle, ``.tile_to_shape(shape)`` tiles it (``ir/shared_layout.py``).
    Usable in a kernel and on the host (pass it as a ``tl.constexpr``)."""
    from ...ir.shared_layout import nv_mma_shared_layout
    return nv_mma_shared_layout(shape, order, elemType, numCTAsPerCGA, numCTASplit, numCTAOrder, fp4Padded,
                                swizzled)


class swizzled_shared_layout_encoding:
    """TLX's swizzled shared layout ``(vectorSize, perPhase, maxPhase, order, numCTAsPerCGA,
    numCTASplit, numCTAOrder)``, a compile-time value for ``local_alloc(..., layout=)``.  tlxc
    honours it when it places the buffer's elements exactly as a layout tlxc addresses does
    (the trivial one, ``make_default``, is row-major; ``vec`` x element = 16 bytes over
    swizzle-span rows is an NVMMA swizzle; other power-of-two XOR swizzles are stored as such,
    for register loads/stores and cp.async only), and refuses it otherwise (``ir/shared_layout.py``)."""

    def __new__(cls, vectorSize, perPhase, maxPhase, order, numCTAsPerCGA=None, numCTASplit=None,
                numCTAOrder=None):
        from ...ir.shared_layout import swizzled_shared_layout
        return swizzled_shared_layout(vectorSize, perPhase, maxPhase, order, numCTAsPerCGA, numCTASplit,
                                      numCTAOrder)

    @staticmethod
    def make_default(rank):
        from ...ir.shared_layout import SwizzledSharedLayout
        return SwizzledSharedLayout.make_default(rank)


class swizzled_layout:
    """``tlx.swizzled_layout(B, M, S, order=[1, 0])``: CuTe's ``Swizzle<B, M, S>`` as a shared
    layout; honoured or refused as ``swizzled_shared_layout_encoding``."""

    def __new__(cls, B, M, S, order=None):
        from ...ir.shared_layout import cute_swizzle_layout
        return cute_swizzle_layout(B, M, S, order)

    @staticmethod
    def make_default(rank):
        from ...ir.shared_layout import SwizzledSharedLayout
        return SwizzledSharedLayout.make_default(rank)


class padded_shared_layout_encoding:
    """TLX's padded shared layout, a compile-time value for ``local_alloc(..., layout=)``: rows
    padded at their end (``with_identity_for([(row_length, pad)], shape, order)``) are stored so
    (``ir/shared_layout.py: PaddedSharedLayout``); other paddings and ``with_bases`` are refused."""

    @staticmethod
    def with_identity_for(interval_padding_pairs, shape, order):
        from ...ir.shared_layout import padded_shared_layout
        return padded_shared_layout(interval_padding_pairs, shape, order)

    @staticmethod
    def with_bases(*args, **kwargs):
        from ...ir.shared_layout import SharedLayoutError
        raise SharedLayoutError("padded_shared_layout_encoding.with_bases (a padded layout over a permuted "
                                "element order) is not supported: tlxc stores padded layouts over row-major "
                                "rows (with_identity_for([(row_length, pad)], shape, order))")


def nv_mma_layout(warps_per_cta, instr_shape, version=(3, 0)):
    """TLX's explicit NVMMA register layout (Triton's ``#nvidia_mma``), a compile-time value for
    ``tlx.zeros(shape, dtype, layout=)``: the tensor is built in that layout and converted where an
    MMA consumes it (``ir/layouts_nvidia.py: NvMmaLayout``)."""
    from ...ir.layouts_nvidia import nv_mma_layout as build
    return build(warps_per_cta, instr_shape, version)


@builtin
def zeros(shape, dtype, layout=None):
    """``tl.zeros(shape, dtype)``, in the register ``layout`` given (a ``tlx.nv_mma_layout``), else
    in the layout its uses choose."""


@builtin
def dump_layout(x):
    """Print, when the kernel is compiled to CUDA, the layout tlxc chose for the register tensor
    or shared buffer ``x`` (stderr); it generates no code."""


@builtin
def local_load(src, token=None, layout=None, relaxed=False, rematerialize_coordinates=False,
               rematerialize_coordinates_group=None):
    """Shared buffer → register tensor."""


@builtin
def local_gather(src, indices, axis, token=None):
    """``result[i...] = src[i... with dim axis replaced by indices[i...]]`` from one shared buffer
    (torch.gather's rule); the result has the indices' shape."""


@builtin
def local_scatter(dst, src, indices, axis, token=None):
    """``dst[i... with dim axis replaced by indices[i...]] = src[i...]`` into one shared buffer."""


@builtin
def local_store(dst, src):
    """Register tensor → shared buffer."""


@builtin
def async_load(src, result, mask=None, other=None, cache_modifier="", eviction_policy="", is_volatile=False,
               bulk=False, bulk_size=None, barrier=None):
    """cp.async from global pointers ``src`` into buffer ``result`` (masked-off
    elements are zero-filled).  With ``bulk=True``: one cp.async.bulk of ``bulk_size``
    contiguous bytes (default: the whole 1-D buffer) from the pointer ``src``, completing
    on ``barrier`` as transaction bytes (``barrier_expect_bytes`` counts them).  On NVIDIA a
    per-thread copy's ``eviction_policy`` is not applied (ptxas can encode the hinted cp.async into
    an illegal instruction); the kernel's ``perf_warnings`` say so."""


@builtin
def async_load_commit_group(tokens=()):
    """Close the group of this thread's pending cp.async copies."""


@builtin
def async_load_wait_group(pendings, tokens=()):
    """Wait until at most ``pendings`` committed groups are still in flight."""


# -- barriers ------------------------------------------------------------------------
@builtin
def alloc_barriers(num_barriers, arrive_count=1):
    """``num_barriers`` mbarriers, each expecting ``arrive_count`` arrivals per phase."""


@builtin
def alloc_warp_barrier(num_barriers, num_warps=1, num_arrivals=1):
    """mbarriers where every thread arrives (``num_warps * 32 * num_arrivals`` per phase)."""


@builtin
def barrier_expect_bytes(bar, size, pred=None):
    """Arrive once and expect ``size`` more transaction bytes (TMA/bulk copies)."""


@builtin
def barrier_wait(bar, phase, pred=None):
    """Wait until the phase of parity ``phase`` has completed."""


@builtin
def barrier_arrive(bar, arrive_count=1, remote_cta_rank=None, pred=None):
    """Arrive: once per arriving warp group (once per thread on warp barriers); with
    ``remote_cta_rank``, on the same barrier of that CTA of the cluster."""


@builtin
def named_barrier_wait(bar, arrive_count):
    """``bar.sync bar, arrive_count``: ids 7..15 are the user's (0..6 are tlxc's)."""


@builtin
def named_barrier_arrive(bar, arrive_count):
    """``bar.arrive bar, arrive_count``."""


@builtin
def fence(scope):
    """``"async_shared"`` (generic→async proxy), ``"gpu"`` or ``"sys"``."""


@builtin
def fence_async_shared():
    """Deprecated alias of ``fence("async_shared")``."""


# -- clusters ----------------------------------------------------------------------------------
@builtin
def cluster_cta_rank():
    """This CTA's rank in its cluster (i32, x fastest)."""


@builtin
def cluster_size_1d():
    """The number of CTAs in a cluster (i32)."""


@builtin
def remote_view(buf, remote_cta_rank):
    """The barrier ``buf`` of CTA ``remote_cta_rank`` of this cluster: arrive on it, never wait."""


@builtin
def cluster_barrier():
    """Wait until every thread of every CTA of the cluster has arrived here."""


@builtin
def fence_mbarrier_init_cluster():
    """Make barrier inits visible to the cluster (before peers arrive on them)."""


@builtin
def remote_shmem_store(dst, src, remote_cta_rank):
    """Store the tensor ``src`` into ``dst``'s place in CTA ``remote_cta_rank``'s shared memory
    (``dst`` is a local buffer view); a later ``cluster_barrier`` makes it visible there."""


@builtin
def async_remote_shmem_store(dst, src, remote_cta_rank, barrier):
    """``remote_shmem_store`` with ``st.async``: the bytes complete transactions on ``barrier``'s
    place in the peer CTA (which waits on it after ``barrier_expect_bytes``)."""


@builtin
def clc_create_context(num_consumers, num_stages=1):
    """Cluster launch control (sm_100a): the barriers and 16-byte response slots of a work
    queue fed by cancelling clusters that have not started; ``num_consumers`` counts every
    task that calls ``clc_consumer``, in every CTA of the cluster."""


@builtin
def clc_producer(clc_pipe_ctx, p_producer, multi_ctas=True, k=0):
    """Ask for the next cluster's work (``clusterlaunchcontrol.try_cancel``) into stage ``k``."""


@builtin
def clc_consumer(clc_pipe_ctx, p_consumer, multi_ctas=True, k=0, return_3d=False):
    """Wait for stage ``k``'s answer and return the tile id it carries (-1: no work left)."""


@builtin
def clc_create_scheduler(num_stages=1):
    """Older TLX spelling of ``clc_create_context(1, num_stages)`` (a DeprecationWarning)."""


@builtin
def clc_fetch_next_worker(scheduler, phase):
    """Older TLX spelling: ``clc_producer(ctx, phase ^ 1, multi_ctas=False)`` then
    ``clc_consumer(ctx, phase, multi_ctas=False)``, returning the next tile id (-1: none)."""


@builtin
def async_remote_shmem_copy(dst, src, remote_cta_rank, barrier):
    """Bulk-copy the local buffer ``src`` into ``dst``'s place in CTA ``remote_cta_rank``,
    completing its bytes on ``barrier``'s place there."""


@builtin
def vote_ballot_sync(mask, pred):
    """``vote.sync.ballot.b32``: the i32 whose bit ``l`` is lane ``l``'s ``pred`` (lanes in
    ``mask``); a tensor ``pred`` gives a tensor, each element its warp's ballot."""


# -- utilities -------------------------------------------------------------------------
@builtin
def thread_id(axis):
    """``threadIdx.{x,y,z}`` as i32."""


@builtin
def clock64():
    """The 64-bit cycle counter (i64)."""


@builtin
def size_of(dtype):
    """Bytes per element of ``dtype`` (compile-time)."""


@builtin
def dtype_of(value):
    """Element dtype of a tensor, pointer, buffer or tensor descriptor (compile-time)."""


# -- TMA (tensor descriptors) ----------------------------------------------------------------
@builtin
def async_descriptor_load(desc, result, offsets, barrier, pred=None, cache_modifier="", eviction_policy="",
                          multicast_targets=(), two_ctas=False):
    """TMA: copy the box of ``desc`` at ``offsets`` into buffer ``result``;
    completion arrives on ``barrier`` as transaction bytes (call
    ``barrier_expect_bytes`` with the box's bytes first)."""


@builtin
def async_descriptor_store(desc, source, offsets, eviction_policy="", store_reduce=""):
    """TMA: copy buffer ``source`` to the box of ``desc`` at ``offsets``."""


@builtin
def async_descriptor_prefetch_tensor(desc, offsets, pred=None, eviction_policy=""):
    """Prefetch the box at ``offsets`` into L2 (no shared memory, no barrier): a later
    TMA load of it then hits L2."""


@builtin
def async_descriptor_store_wait(pendings):
    """Wait until at most ``pendings`` TMA stores (and bulk ``async_store``s) still read shared memory."""


# -- bulk copies and prefetch hints -------------------------------------------------------------
@builtin
def async_store(dst_global_ptr, src_smem, size):
    """cp.async.bulk of ``size`` bytes (a multiple of 16) of the 1-D buffer ``src_smem`` to
    ``dst_global_ptr``; wait with ``async_descriptor_store_wait``."""


@builtin
def prefetch(pointer, level="L2", mask=None, tensormap=False):
    """Prefetch every (unmasked) address of ``pointer`` into L2 (``level="L2"``) or L1 and L2
    (``"L1"``); with ``tensormap=True``, prefetch the tensor descriptor ``pointer`` itself."""


@builtin
def get_fp8_format_name(dtype):
    """``"e5m2"`` for tl.float8e5, ``"e4m3"`` for tl.float8e4nv (compile-time)."""


# -- asynchronous MMA (Hopper wgmma, Blackwell tcgen05) ------------------------------------------
@builtin
def async_dot(A, B, acc=None, use_acc=None, pred=None, mBarriers=(), two_ctas=False, force_async=False,
              input_precision=None, out_dtype=float32, a_k_order=None):
    """``(use_acc ? acc : 0) + A @ B`` on the tensor cores.

    Hopper (wgmma; ``acc`` a register tensor): returns the accumulator
    asynchronously: read it only after ``async_dot_wait``.  ``A``: a shared
    buffer or a register tensor [M, K]; ``B``: a shared buffer [K, N] (a
    ``local_trans`` view for K-major B).

    Blackwell (tcgen05; ``acc`` a tensor-memory buffer [128, N]): writes
    ``acc`` in place and returns None.  With ``mBarriers`` (or
    ``force_async``) it is asynchronous and the hardware arrives once on each
    barrier when the MMA (and every earlier tcgen05 op of the task) is done;
    without, it returns once the product is in ``acc``.  ``use_acc`` defaults
    to True (accumulate); ``pred`` skips the MMA where false.

    ``a_k_order="accumulator"`` (tlxc's, Hopper, an fp8 A in registers): the MMA reads A's
    columns, within each group of 32, in the order the threads of an f32 accumulator hold them
    -- fragment position ``16h + 4q + 2a + b`` takes column ``16h + 8a + 2q + b`` -- so P computed
    from a wgmma accumulator needs no exchange between threads; the result is ``A[:, π] @ B``,
    right when B's rows are stored in the same order (attention's Vᵀ, permuted when it is made)."""


@builtin
def async_dot_scaled(A, B, acc, A_scale, A_format, B_scale, B_format, use_acc=None, pred=None, mBarriers=(),
                     two_ctas=False, force_async=False, out_dtype=float32):
    """Block-scaled ``acc (+)= (A * 2^(A_scale - 127)) @ (B * 2^(B_scale - 127))`` on tcgen05
    (Blackwell, mxfp8: ``A_format`` / ``B_format`` ``"e4m3"`` or ``"e5m2"``): one ue8m0 scale
    per 32 K elements of a row of A / a column of B, in uint8 shared buffers of shape
    [1, ceil(M / 128), K / 128, 2, 256] (the cuBLAS block-scaling layout TLX loads by TMA)."""


@builtin
def tcgen05_commit(mBarrier, two_ctas=False):
    """Arrive once on ``mBarrier`` when every tcgen05 MMA this task issued so far is
    done (Blackwell)."""


@builtin
def subslice(tmem_buf, offset, size):
    """Columns ``offset .. offset + size`` of a [128, N] tensor-memory buffer."""


@builtin
def fast_exp2(x, fma_every):
    """``2 ** x`` of float32 ``x`` (as ``tl.exp2``) with the work split between two pipes: in
    each thread every ``fma_every``-th register (compile-time, >= 2) is computed by a degree-3
    polynomial on the FMA pipe (round-to-nearest range reduction; relative error <= 7.5e-5,
    results below 2^-125 are 0), the others by ``ex2.approx`` on the MUFU pipe -- for softmax
    loops bound by the exponentials (flash-attention 4's trick).  NVIDIA targets; elsewhere,
    and on the interpreter, ``tl.exp2``."""


@builtin
def async_dot_wait(pendings, inp):
    """Wait until at most ``pendings`` async_dot groups of this task are in
    flight; returns ``inp`` (reassign it: ``acc = tlx.async_dot_wait(0, acc)``)."""



@builtin
def allocate_tensor_descriptor(num):
    """``num`` 128-byte tensor-map slots in the program's global scratch (``tlxc.set_allocator``);
    ``slots[i]`` (compile-time ``i``) is the pointer to slot ``i``."""


@builtin
def make_tensor_descriptor(desc_ptr, base, shape, strides, block_shape, padding_option="zero"):
    """``tl.make_tensor_descriptor`` whose tensor map is encoded into ``desc_ptr`` (a slot of
    ``allocate_tensor_descriptor``; None: the compiler's own scratch); returns the descriptor."""


@builtin
def reinterpret_tensor_descriptor(desc_ptr, block_shape, dtype):
    """The tensor map encoded at ``desc_ptr`` as a descriptor of ``block_shape`` x ``dtype``."""


def tensor_descriptor_type(dtype, block_shape, swizzle: int = 0):
    """The type of a TMA descriptor parameter, for annotations (so that
    ``tlxc compile``/``tlxc check`` can type it without a launch):
    ``a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128)``."""
    from ...ir.types import TensorDescType
    return TensorDescType(dtype, tuple(int(d) for d in block_shape), int(swizzle))

_OLDER_CLC = ("an older TLX cluster-launch-control call; TLX's current API is clc_create_context(num_consumers, "
              "num_stages) / clc_producer(ctx, phase, multi_ctas, k) / clc_consumer(ctx, phase, multi_ctas, k)")
# Older TLX names tlxc does not map (docs/ports.md, "TLX Blackwell tutorials"): why, at the call.
__tlxc_removed__ = {
    "clc_producer_wait": _OLDER_CLC + " (the files that call clc_producer_wait pass clc_producer / "
                         "clc_consumer / clc_create_context their older argument orders, which take the same "
                         "positional integers as the current ones, so tlxc cannot tell which a call means)",
    "alloc_clc_responses": _OLDER_CLC + " (alloc_clc_responses / clc_issue / clc_query are the pieces of "
                           "clc_producer / clc_consumer without their barriers: no current public call matches)",
    "clc_issue": _OLDER_CLC + " (clc_issue is the try_cancel of clc_producer without its barriers)",
    "clc_query": _OLDER_CLC + " (clc_query is the decode of clc_consumer without its wait and arrival)",
}


def __getattr__(name):
    # get_bufidx_phase is a @kernel helper (warp_spec.py, as in TLX); imported lazily because the
    # kernel decorator imports the runtime, which imports the language.
    if name == "get_bufidx_phase":
        from .warp_spec import get_bufidx_phase
        globals()[name] = get_bufidx_phase
        return get_bufidx_phase
    raise AttributeError(f"module 'tlxc.language.tlx' has no attribute {name!r}")
