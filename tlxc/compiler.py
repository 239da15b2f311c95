"""The compile pipeline: frontend → passes → backend, one function per stage.

``compile_kernel`` fills ``CompiledKernel.asm`` with every stage it ran:
``ir`` (after the frontend), ``ir.opt`` (after the passes), ``cuda``, ``ptx``
(on request), ``cubin``; ``metadata`` holds the resources.
"""
from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

# the targets and their spellings live in tlxc/arch.py (one table); re-exported here
from .arch import AMD_ARCHS, ARCHS, NVIDIA_ARCHS, ArchError  # noqa: F401
from .arch import resolve as resolve_arch
from .check import check_kernel
from .check.findings import Finding
from .errors import CompilationError
from .frontend.build_ir import build_kernel_ir
from .frontend.specialize import Specialization
from .ir.core import clone_module
from .ir.printer import print_module
from .ir.verifier import verify_module
from .options import COMPILE_OPTIONS, REFUSED_OPTIONS, CompileOptions
from .passes.manager import PassManager
from .target import DEFAULT_ARCH, STAGE_SUFFIXES, TARGETS, Target, get_target, vendor_stages

# The stages: the frontend's and the passes' IR, the code stages the registered targets' backends make
# (``Target.stages``: a backend registers its own with its targets), and ``stats``.
CODE_STAGES = tuple(dict.fromkeys(s for t in TARGETS.values() for s in t.stages))
STAGES = ("ir", "ir.opt", *CODE_STAGES, "stats")
BACKEND_STAGES = (*CODE_STAGES, "stats")      # what a target's backend makes


@dataclass
class CompiledKernel:
    name: str
    arch: str
    spec: Specialization
    module: Any                         # the IR module after passes
    asm: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def check_arch(arch: str) -> str:
    """The target ``arch`` names (``sm_90`` and ``cuda:90`` name ``sm_90a``: tlxc/arch.py)."""
    try:
        return resolve_arch(arch).arch
    except ArchError as exc:
        raise CompilationError(str(exc)) from None


def frontend(kfn, spec: Specialization, *, arch: str = DEFAULT_ARCH, num_warps: int = 4,
             cluster: tuple[int, int, int] | None = None, num_ctas: int = 1):
    """The kernel's IR for one specialization, allocations in branches hoisted
    (``passes.hoist_allocations``); ``cluster`` (``ctas_per_cga``) adds the
    cluster barriers of ``passes.cluster_syncs``; ``num_ctas`` (Triton's CTAs per program:
    runtime/launch.py, "num_ctas") is checked there too; ``place-tasks`` gives every
    async task its warps and register budget (``passes.place_tasks``)."""
    if num_warps not in (1, 2, 4, 8, 16, 32):
        raise CompilationError(f"num_warps must be a power of two from 1 to 32, got {num_warps}")
    lanes = get_target(arch).warp_size
    if num_warps * lanes > 1024:
        raise CompilationError(f"num_warps={num_warps} on {arch} is {num_warps * lanes} work-items; a work-group holds "
                               f"at most 1024 ({1024 // lanes} waves of {lanes})")
    if num_ctas != 1:
        _check_num_ctas(num_ctas, cluster, arch)
    options = CompileOptions(num_warps=num_warps, arch=arch, cluster=cluster, num_ctas=num_ctas)
    module = build_kernel_ir(kfn, spec, options)
    for p in frontend_passes(get_target(arch)):     # (not through PassManager: their errors are the user's)
        module = p.run(module, options)
    verify_module(module)
    return module


def _check_num_ctas(num_ctas, cluster, arch: str) -> None:
    if not isinstance(num_ctas, int) or isinstance(num_ctas, bool) or not 1 <= num_ctas <= 8:
        raise CompilationError(f"num_ctas must be an int from 1 to 8 (CTAs per program, in one cluster), "
                               f"got {num_ctas!r}")
    target = get_target(arch)
    if not target.is_nvidia or target.capability < (9, 0):
        raise CompilationError(f"num_ctas={num_ctas} runs each program on a cluster of CTAs, which needs "
                               f"sm_90 or newer; {arch} has no clusters: use num_ctas=1")
    if cluster is not None:
        raise CompilationError(f"num_ctas={num_ctas} and ctas_per_cga={tuple(cluster)} both set the cluster: "
                               f"num_ctas makes each program a cluster of num_ctas CTAs (the grid multiplied), "
                               f"ctas_per_cga groups the grid's CTAs into clusters; pass one of them")


def frontend_passes(target: Target | str) -> list:
    """The passes every user of the frontend's IR needs (the interpreter, ``tlxc check`` and the
    compile): hoist-allocations, cluster-syncs, place-tasks (each task's warps and register budget)
    and warp-pipeline-bounds (AMD's warp-pipelined loops)."""
    from .passes.cluster_syncs import InsertClusterSyncs
    from .passes.hoist_allocations import HoistAllocations
    from .passes.place_tasks import PlaceTasks
    from .passes.warp_pipeline import WarpPipelineBounds
    return [HoistAllocations(), InsertClusterSyncs(), PlaceTasks(), WarpPipelineBounds()]


def default_pipeline(target: Target | str, options: CompileOptions | None = None) -> PassManager:
    """The passes of a compile for ``target`` (or its name), each built with its own options
    from ``options`` (pipeline-loads' and pipeline-operand-loads' ``num_stages``, check-barriers'
    ``mode``; the ring switches from the environment): the wgmma rewrites only where it has wgmma.

    lower-dot-to-wgmma and pipeline-loads rewrite tl.dot into TLX ops on sm_90a; drain-dot-wait
    moves the wgmma drain after such a loop (and after a hand-written TLX loop of that shape)
    into its last iteration; the second canonicalize drops the address arithmetic they leave dead.
    async-dot-on-mfma turns TLX's async_dot into local_loads and a tl.dot on AMD (MFMA is synchronous);
    fold-dot-add gives `acc += tl.dot(a, b)` its accumulator; hoist-operand-stores copies a
    loop-invariant operand to shared memory once, dedupe-operand-stores stores equal bytes once,
    pipeline-operand-loads rings the loaded operands of loops pipeline-loads leaves alone
    (attention), share-operand-buffers lets operand buffers of disjoint lifetimes share bytes
    (passes/dot_operands.py, passes/pipeline_operands.py); after infer-layouts,
    hoist-conversions and load-in-use-layout keep layout conversions out of loops; check-barriers
    (check/check_barriers.py) runs the static checker on every compile; fuse-dot-pairs issues two
    wgmma products on one A as one wider instruction, their B buffers interleaved (passes/dot_pairs.py)."""
    from .check.check_barriers import CheckBarriers, barrier_mode
    from .passes.canonicalize import Canonicalize
    from .passes.dot_mfma import AsyncDotOnMfma
    from .passes.dot_operands import DedupeOperandStores, FoldDotAdd, HoistOperandStores, ShareOperandBuffers
    from .passes.dot_pairs import FuseDotPairs
    from .passes.dot_register_a import RegisterAOperand
    from .passes.dot_wait_drain import DrainDotWait
    from .passes.dot_wgmma import LowerDotToWgmma, mma_sync_ring_target
    from .passes.hoist_conversions import HoistConversions
    from .passes.layouts import InferLayouts
    from .passes.load_in_layout import LoadInUseLayout
    from .passes.pipeline import PipelineLoads
    from .passes.pipeline_operands import PipelineOperandLoads
    from .passes.shared_layouts import SharedLayouts
    from .passes.shared_memory import AllocateShared
    target = get_target(target) if isinstance(target, str) else target
    options = options if options is not None else CompileOptions(arch=target.name)
    wgmma = target.has("wgmma")
    return PassManager([
        Canonicalize(), FoldDotAdd(), *([LowerDotToWgmma()] if wgmma or mma_sync_ring_target(target.name) else []),
        *([AsyncDotOnMfma()] if not target.is_nvidia else []),
        PipelineLoads(num_stages=options.num_stages),
        *([AsyncDotOnMfma()] if mma_sync_ring_target(target.name) else []),
        *([DrainDotWait(), HoistOperandStores(), DedupeOperandStores(),
           PipelineOperandLoads(num_stages=options.num_stages), RegisterAOperand(), ShareOperandBuffers()]
          if wgmma else []),
        Canonicalize(), InferLayouts(), HoistConversions(), LoadInUseLayout(), CheckBarriers(mode=barrier_mode(options)),
        SharedLayouts(), *([FuseDotPairs()] if wgmma else []), AllocateShared()])


def check_passes(target: Target | str) -> list:
    """What ``check_function`` runs before the checks: the rewrites whose result the checker
    reads (the wgmma ones gate themselves on the target) and infer-layouts."""
    from .passes.canonicalize import Canonicalize
    from .passes.dot_wait_drain import DrainDotWait
    from .passes.dot_wgmma import LowerDotToWgmma
    from .passes.layouts import InferLayouts
    from .passes.pipeline import PipelineLoads
    return [Canonicalize(), LowerDotToWgmma(), PipelineLoads(), DrainDotWait(), Canonicalize(), InferLayouts()]


def optimize(module, arch: str, num_warps: int, **options):
    """Run the pass pipeline; ``options`` are the other fields of ``CompileOptions`` (e.g.
    ``check_barriers=False``, ``debug_barriers=True``, ``num_stages=3``)."""
    compile_options = CompileOptions(num_warps=num_warps, arch=arch, **options)
    return default_pipeline(get_target(arch), compile_options).run(module, compile_options)


def check_compile_options(options: dict) -> None:
    """Refuse a compile option tlxc does not implement (saying why) or does not know: none is dropped."""
    for name in options:
        if name in REFUSED_OPTIONS:
            raise CompilationError(f"{name} is not supported: {REFUSED_OPTIONS[name]}")
        if name not in COMPILE_OPTIONS:
            raise CompilationError(f"unknown compile option '{name}' (expected one of {', '.join(COMPILE_OPTIONS)}, "
                                   f"or arch, num_warps, stages, lineinfo, debug_barriers, cluster)")


def compile_kernel(kfn, spec: Specialization, *, arch: str = DEFAULT_ARCH, num_warps: int = 4,
                   stages: tuple[str, ...] = ("ir", "ir.opt", "cuda", "cubin"),
                   lineinfo: bool = False, debug_barriers: bool = False,
                   cluster: tuple[int, int, int] | None = None, **options) -> CompiledKernel:
    arch = check_arch(arch)
    check_compile_options(options)
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise CompilationError(f"unknown stage(s) {', '.join(sorted(unknown))} (expected {', '.join(STAGES)})")
    vendor = get_target(arch).vendor
    own = vendor_stages(vendor)
    foreign = [s for s in stages if s in CODE_STAGES and s not in own]
    if foreign:
        raise CompilationError(f"stage(s) {', '.join(foreign)} are not made for {arch} (an {vendor.upper()} target; "
                               f"its code stages are {', '.join(own)})")
    start = time.perf_counter()
    num_ctas = options.get("num_ctas", 1)
    module = frontend(kfn, spec, arch=arch, num_warps=num_warps, cluster=cluster, num_ctas=num_ctas)
    compiled = CompiledKernel(kfn.__name__, arch, spec, module)
    compiled.asm["ir"] = print_module(module)
    compiled.metadata["num_warps"] = num_warps
    compiled.metadata["cluster"] = list(cluster) if cluster else None
    if num_ctas != 1:
        compiled.metadata["num_ctas"] = num_ctas
    compiled.metadata["frontend_seconds"] = time.perf_counter() - start
    wants_backend = any(s in stages for s in BACKEND_STAGES)
    if "ir.opt" in stages or wants_backend:
        module = optimize(module, arch, num_warps, debug_barriers=debug_barriers,    # in place: no one else holds it
                          check_barriers=options.get("check_barriers", True),
                          num_stages=options.get("num_stages"))     # pipeline-loads' default depth
        compiled.module = module
        compiled.asm["ir.opt"] = print_module(module)
        if getattr(module, "remarks", None):
            compiled.metadata["not_pipelined"] = list(module.remarks.values())
    if wants_backend:
        backend = backend_of(get_target(arch), stages)
        asm, metadata = backend.build(module, get_target(arch), stages=stages, lineinfo=lineinfo,
                                      debug_barriers=debug_barriers, options=options)
        compiled.asm.update(asm)
        compiled.metadata.update(metadata)
        if debug_barriers:          # (the watchdogs' calls serialize wgmma by design: no launch warning)
            compiled.metadata["debug_barriers"] = True
        compiled.asm["stats"] = format_stats(compiled)
    compiled.metadata["compile_seconds"] = time.perf_counter() - start
    if os.environ.get("TLXC_DUMP_DIR"):
        dump(compiled, os.environ["TLXC_DUMP_DIR"])
    return compiled


def backend_of(target, stages=()):
    """The backend module of ``target`` (``Target.backend``, tlxc/target.py): it offers
    ``build(module, target, *, stages, lineinfo, debug_barriers, options) -> (asm, metadata)``."""
    if target.backend is None:
        wanted = ", ".join(s for s in stages if s in BACKEND_STAGES)
        raise CompilationError(f"the {target.vendor.upper()} backend (HIP for {target.name}) is not built yet: "
                               f"--arch {target.name} gives the ir and ir.opt stages and 'tlxc check', not {wanted}")
    return importlib.import_module(target.backend)


def nvrtc_options(options: dict) -> list[str]:
    """NVIDIA's NVRTC options of a compile's launch options (codegen_nvptx/backend.py)."""
    from .codegen_nvptx.backend import nvrtc_options as nvptx_options
    return nvptx_options(options)


def copy_module(module):
    """Passes rewrite in place: a copy for them where the frontend's module lives on (the interpreter
    runs it)."""
    return clone_module(module)


def format_stats(compiled: CompiledKernel) -> str:
    """The ``stats`` stage: one line of resources, then a ``warning:`` line per
    ``perf_warnings`` entry."""
    m = compiled.metadata
    symbol = m.get("name", compiled.name)
    shown = compiled.name if symbol == compiled.name else f"{compiled.name} [{symbol}]"
    lines = [f"kernel {shown} ({compiled.arch}): {m.get('threads')} threads, "
             f"{m.get('registers')} registers/thread, {m.get('spills_bytes', 0)} bytes spilled, "
             f"{m.get('shared_bytes', 0)} bytes shared memory"]
    lines += [f"warning: {w}" for w in perf_warnings(m)]
    return "\n".join(lines) + "\n"


def perf_warnings(metadata: dict) -> list[str]:
    """What costs speed: register spills and serialized wgmma instructions (ptxas's report; each
    MMA waits for the previous one, note C7514 and kin), tl.dot loops the pipeliner left alone,
    with the reason (``not_pipelined``, passes/pipeline.py), and hints the lowering dropped
    (``lowering_notes``: a cp.async's L2 eviction policy, codegen_nvptx/rules_tlx.py)."""
    warnings = []
    spills = metadata.get("spills_bytes") or 0
    if spills:
        warnings.append(f"{spills} bytes of registers spilled to local memory ({metadata.get('registers')} "
                        f"registers/thread): fewer live values, smaller tiles or more warps avoid it")
    warnings += _serialized(metadata)
    warnings += metadata.get("not_pipelined") or []
    warnings += metadata.get("lowering_notes") or []       # hints the lowering could not honour (rules_tlx)
    return warnings


def _serialized(metadata: dict) -> list[str]:
    serialized = metadata.get("wgmma_serialized")
    if not serialized:
        return []
    return [f"ptxas serializes the wgmma instructions ({serialized}): each MMA waits for the previous one, a "
            f"large loss of tensor-core throughput"]


def launch_warnings(metadata: dict) -> list[str]:
    """The ``perf_warnings`` a launch raises as ``tlxc.PerformanceWarning``: the large losses a user cannot
    see from the result (ptxas serialized the wgmma instructions; a hint the lowering dropped), not
    spills or unpipelined loops, which ported kernels carry often and ``--emit stats`` reports.  A
    ``TLXC_DEBUG_BARRIERS`` build's serialization is the watchdogs' own (their trap and report are
    calls): not warned."""
    serialized = [] if metadata.get("debug_barriers") else _serialized(metadata)
    return serialized + list(metadata.get("lowering_notes") or [])


def dump(compiled: CompiledKernel, root: str) -> None:
    """Write every stage as ``<root>/<name>.<ext>``; the name (``softmax_kernel_BLOCK8192-3f9a0c1e``:
    the symbol and a digest of the rest of the specialization, ``frontend/naming.py: artifact_name``)
    is the one ``TLXC_OVERRIDE_DIR`` looks up, so a dumped ``.cu`` can be edited in place and swapped in."""
    from .frontend.naming import artifact_name
    os.makedirs(root, exist_ok=True)
    kernels = getattr(compiled.module, "kernels", None)
    name = artifact_name(kernels[0], compiled.arch) if kernels else kernel_symbol_of(compiled)
    suffix = {"ir": "ir", "ir.opt": "opt.ir", "stats": "txt", **STAGE_SUFFIXES}
    for stage, text in compiled.asm.items():
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(os.path.join(root, f"{name}.{suffix.get(stage, stage)}"), mode) as f:
            f.write(text)


def kernel_symbol_of(compiled: CompiledKernel) -> str:
    """The kernel's readable C symbol (frontend/naming.py); the Python name if it has none."""
    kernels = getattr(compiled.module, "kernels", None)
    if kernels:
        return kernels[0].attrs.get("symbol", kernels[0].attrs.get("sym_name", compiled.name))
    return compiled.metadata.get("name", compiled.name)


def check_function(kfn, spec, *, arch: str = DEFAULT_ARCH, num_warps: int = 4, cluster=None,
                   num_ctas: int = 1) -> list[Finding]:
    """What ``tlxc check`` reports for one specialized ``@tlxc.kernel``: a
    frontend error, or the findings of ``check_kernel`` plus shared-memory
    capacity (``allocate-shared``), without generating code."""
    from .errors import TlxcError
    from .passes.shared_memory import allocate_kernel
    try:
        module = frontend(kfn, spec, arch=arch, num_warps=num_warps, cluster=cluster, num_ctas=num_ctas)
        options = CompileOptions(num_warps=num_warps, arch=arch, cluster=cluster, num_ctas=num_ctas)
        for p in check_passes(arch):
            module = p.run(module, options)
    except TlxcError as exc:
        return [Finding(exc.message, exc.loc, list(exc.notes), check="frontend")]
    findings = []
    for kernel in module.kernels:
        findings += check_kernel(kernel)
        try:
            allocate_kernel(kernel, arch)
        except TlxcError as exc:
            memory = "tensor-memory" if "tensor-memory" in exc.message else "shared-memory"
            findings.append(Finding(exc.message, exc.loc, list(exc.notes), check=f"resource.{memory}",
                                    kind="resource"))
    return findings
