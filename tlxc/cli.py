"""The ``tlxc`` command line: compile or check the kernels of a Python file.

    tlxc compile kernels.py --arch sm_90a --emit ir,cuda,cubin -o out/
    tlxc check kernels.py
    tlxc trace kernels.py -o timeline.html      # cli_trace.py
    tlxc --version

Exit codes: 0 success; 1 a kernel does not compile (the diagnostics are
printed as ``file:line:col: error: ...``); 2 the command itself is wrong
(unknown arch, stage or kernel, a missing file, a missing constexpr value, a
stage the target does not produce yet).  No GPU is needed.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .arch import ArchError, accepted, arch_specific_use, local_arch, resolve
from .cli_kernels import (  # the file loading and -D parsing live there (cli_trace.py uses them too)
    KernelSetupError,
    UsageError,
    autotune_configs,
    chosen_configs,
    config_constexprs,
    load_module,
    module_kernels,
    module_level_kernels,
    nested_kernels,
    parse_config_choice,
    parse_define,
    parse_define_value,  # noqa: F401 (tlxc.cli.parse_define_value: tests, users)
    resolve_descriptor_boxes,
)
from .cli_trace import add_trace_parser, cmd_trace
from .compiler import STAGES
from .errors import TlxcError
from .frontend.specialize import (
    Specialization,
    annotation_type,
    is_constexpr_annotation,
    parse_signature,
    signature_hints,
    specialization_from_args,
    specialization_from_types,
)
from .target import DEFAULT_ARCH

# The stages --emit accepts are the compiler's (``tlxc.compiler.STAGES``);
# which of them a target produces is up to its backend (a missing one: exit 2).
NUM_WARPS = (1, 2, 4, 8, 16, 32)


@dataclass
class Job:
    """One kernel of the file, with what is needed to compile it."""

    attr: str                 # the module-level name it is bound to (outer.name for a nested kernel)
    kfn: Any                  # the KernelFunction
    explicit: bool            # named with --kernel
    spec: Specialization | None = None
    skip_reason: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    wrapper: Any = None       # the @autotune / @heuristics above the kernel, if any
    config: Any = None        # the autotune Config this job compiles
    config_index: int | None = None
    stem: str = ""            # DIR/<stem>.<stage>
    num_warps: int = 4
    cluster: Any = None
    num_ctas: int = 1           # an autotune config's num_ctas (Triton's CTAs per program)

    @property
    def name(self) -> str:
        return self.kfn.__name__


# -- argument parsing -------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tlxc",
        description="Compile GPU kernels written with Triton's tl.* and TLX's tlx.* semantics. "
                    "No GPU is needed to compile or check.",
        epilog="exit codes: 0 success, 1 a kernel does not compile, 2 bad command line. "
               "Run 'tlxc compile -h' for the compile options.")
    parser.add_argument("--version", action="version", version=f"tlxc {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    compile_cmd = commands.add_parser(
        "compile", help="compile kernels and write each requested stage to a file",
        description="Compile the @tlxc.kernel functions of FILE (all of them, or those named by "
                    "--kernel) and write DIR/<kernel>.<stage> for each stage of --emit.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  tlxc compile examples/softmax.py --arch sm_90a --emit ir\n"
               "  tlxc compile examples/matmul.py --arch sm_100a -D BLOCK_K=32 --emit ir,cuda,cubin -o out/\n"
               "  tlxc compile k.py --arch sm_90a --kernel add --signature 'x=*fp32,y=*fp32,n=i32' -D BLOCK=256")
    _add_kernel_options(compile_cmd)
    compile_cmd.add_argument("--arch", default=None, metavar="ARCH",
                             help="target (default: the local GPU's): " + accepted())
    compile_cmd.add_argument("--num-warps", type=int, default=None, metavar="N",
                             help="warps per program: 1, 2, 4, 8, 16 or 32 (default: the autotune config's, else 4)")
    compile_cmd.add_argument("--emit", default="ir", metavar="STAGES",
                             help=f"comma-separated stages to write, from {', '.join(STAGES)} (default: ir)")
    compile_cmd.add_argument("-o", "--output-dir", metavar="DIR",
                             help="directory for DIR/<kernel>.<stage> (created if needed); "
                                  "without it, text stages are printed to stdout")

    check_cmd = commands.add_parser(
        "check", help="run the frontend and the static barrier/resource checks; print only findings",
        description="Trace the @tlxc.kernel functions of FILE and run the static checks (barrier phases and "
                    "arrive counts, ring protocols, named barriers, cp.async races, shared memory, register "
                    "budgets; see docs/checking.md) without generating code. Prints nothing and exits 0 when "
                    "every kernel is fine; otherwise prints one 'file:line:col: error: ...' per finding, with "
                    "'note:' lines, and exits 1. Notes alone (what could not be decided statically) exit 0.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--run: the file defines check_inputs() returning (grid, args[, kwargs]) for the kernel, or\n"
               "{kernel name: (grid, args[, kwargs])}, with small CPU tensors; each kernel then also runs on\n"
               "the interpreter under several interleavings (deadlocks, races, out-of-bounds accesses).")
    _add_kernel_options(check_cmd)
    check_cmd.add_argument("--arch", default=None, metavar="ARCH",
                           help="target whose rules apply (default: the local GPU's, else sm_90a): " + accepted())
    check_cmd.add_argument("--num-warps", type=int, default=None, metavar="N",
                           help="warps per program (default: the autotune config's, else 4)")
    check_cmd.add_argument("--run", action="store_true",
                           help="also run each kernel on the interpreter with the inputs of the file's "
                                "check_inputs() under several interleavings")
    check_cmd.add_argument("--seeds", type=int, default=5, metavar="N",
                           help="with --run: the default schedule plus N-1 seeded interleavings (default: 5)")
    check_cmd.add_argument("-v", "--verbose", action="store_true",
                           help="also print, as notes, remarks on idioms the checker accepts (e.g. a "
                                "named-barrier ping-pong that leaves its last hand-off open); they never fail")
    add_trace_parser(commands)
    return parser


def _add_kernel_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("file", metavar="FILE.py", help="Python file defining @tlxc.kernel functions")
    cmd.add_argument("--kernel", action="append", default=[], metavar="NAME",
                     help="compile only this kernel (repeatable); default: every kernel of FILE whose "
                          "parameter types are known")
    cmd.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                     help="value of a tl.constexpr parameter: a Python literal (128, 0.5, True, 'text') or a "
                          "dtype (bf16, fp32, tl.float16); repeatable")
    cmd.add_argument("--signature", metavar="SIG",
                     help="types of runtime parameters, Triton's spelling: 'x=*bf16,n=i32' "
                          "(overrides annotations); 'n=i32:16' states that n is divisible by 16, "
                          "'n=i32:1' that it equals 1, as a launch would find out")
    cmd.add_argument("--ctas-per-cga", metavar="X[,Y[,Z]]",
                     help="compile for clusters of X*Y*Z CTAs, as a launch with ctas_per_cga=(X, Y, Z) does")
    cmd.add_argument("--config", metavar="N|all",
                     help="for @tlxc.autotune kernels: compile the config of index N (default 0) or every "
                          "config ('all': DIR/<kernel>.config<N>.<stage>). The config's values are constexprs "
                          "(-D overrides them), its num_warps/ctas_per_cga the launch's, and its pre_hook "
                          "gives box-less descriptors (--signature 'a_desc=tensordesc<fp16>') their box")


# -- selecting kernels and specializing them ------------------------------------------------
def select_jobs(module, path: str, names: Sequence[str], config_choice: str | int = 0) -> list[Job]:
    """A job per kernel (module-level and nested: ``cli_kernels.py``) and chosen autotune config."""
    kernels = module_level_kernels(module)
    nested, notes = nested_kernels(module)
    kernels += [(qualified, kfn, None) for qualified, kfn in nested]
    if not kernels:
        for note in notes:
            print(f"tlxc: note: {note}", file=sys.stderr)
        raise UsageError(f"{path} defines no @tlxc.kernel function")
    if not names:
        chosen = [(attr, kfn, wrapper, False) for attr, kfn, wrapper in kernels]
    else:
        chosen = [(name, *_kernel_named(path, kernels, name, notes), True) for name in dict.fromkeys(names)]
    jobs = []
    for attr, kfn, wrapper, explicit in chosen:
        configs = autotune_configs(wrapper)
        stem = attr if "." in attr else kfn.__name__
        if configs is None:
            jobs.append(Job(attr, kfn, explicit, wrapper=wrapper, stem=stem))
            continue
        try:
            picked = chosen_configs(kfn.__name__, configs, config_choice)
        except KernelSetupError as exc:
            raise UsageError(str(exc)) from None
        for index, config in picked:
            suffix = f".config{index}" if config_choice == "all" else ""
            jobs.append(Job(attr, kfn, explicit, wrapper=wrapper, config=config, config_index=index,
                            stem=stem + suffix))
    return jobs


def _kernel_named(path: str, kernels: list, name: str, notes: list[str]) -> tuple[Any, Any]:
    matches = [(kfn, wrapper) for attr, kfn, wrapper in kernels if name == attr]
    if not matches:
        matches = [(kfn, wrapper) for attr, kfn, wrapper in kernels if name == kfn.__name__]
    if len(matches) == 1:
        return matches[0]
    if matches:
        same = ", ".join(attr for attr, kfn, _ in kernels if kfn.__name__ == name)
        raise UsageError(f"{path} has several kernels named '{name}' ({same}): name one by its qualified name")
    known = ", ".join(sorted({attr if "." in attr else kfn.__name__ for attr, kfn, _ in kernels}))
    unavailable = [note for note in notes if note.startswith(f"{name} ") or f".{name} " in note]
    why = f"; {unavailable[0]}" if unavailable else ""
    raise UsageError(f"{path} has no kernel named '{name}' (kernels: {known}){why}")


def specialize_jobs(jobs: list[Job], types: dict, constexprs: dict, hints: dict | None = None,
                    module: Any = None) -> None:
    """Give each job its specialization, or a reason to skip it (helpers).  Parameters
    with neither an annotation nor a ``--signature`` type take the type of the argument
    the file's ``check_inputs()`` passes (a dtype-generic kernel's pointers, say), and
    constexprs without a default or ``-D`` value the value it passes."""
    inferred, problems = _from_check_inputs(module, jobs, types, constexprs)
    for job in jobs:
        params = job.kfn.param_names
        found_types, found_constexprs = inferred.get(job.name, ({}, {}))
        job_types = {k: v for k, v in {**found_types, **types}.items() if k in params}
        job_hints = {k: v for k, v in (hints or {}).items() if k in params}
        try:
            job_constexprs = config_constexprs(job.name, job.wrapper, job.config, constexprs, params)
            job_constexprs = {**{k: v for k, v in found_constexprs.items() if _lacks_value(job.kfn, k)},
                              **job_constexprs}
            job_types = resolve_descriptor_boxes(job.name, job.config, job_types, job_constexprs)
        except KernelSetupError as exc:
            raise UsageError(str(exc)) from None
        untyped = _untyped_params(job.kfn, job_types, job_constexprs)
        if untyped:
            problem = problems.get(job.name)
            if job.explicit:
                listed = ", ".join(untyped)
                hook = f"; the file's {problem}" if problem else ", or define check_inputs() in the file"
                raise UsageError(f"kernel '{job.name}' has no type for parameter(s) {listed}: annotate them "
                                 f"(e.g. x_ptr: tl.pointer_type(tl.float32)), pass "
                                 f"--signature \"{untyped[0]}=*fp32,...\"{hook}")
            job.skip_reason = problem or "no signature"
            continue
        if not job.explicit and _returns_value(job.kfn):
            job.skip_reason = "it returns a value (helpers are inlined into their callers)"
            continue
        try:
            job.spec = specialization_from_types(job.kfn, job_types, job_constexprs, job_hints)
        except TlxcError as exc:   # missing constexpr values: a command-line problem
            if "." in job.attr and not job.explicit:      # a nested kernel found, not asked for
                job.skip_reason = exc.message
                continue
            raise UsageError(exc.message) from None
    used = {p for job in jobs if job.spec for p in job.kfn.param_names}
    compiled = ", ".join(job.name for job in jobs if job.spec) or "none"
    for option, names in (("-D", constexprs), ("--signature", types)):
        unused = sorted(set(names) - used)
        if unused:
            raise UsageError(f"{option} names {', '.join(unused)}, which is no parameter of the kernels "
                             f"being compiled ({compiled})")


def _from_check_inputs(module, jobs: list[Job], types: dict,
                       constexprs: dict) -> tuple[dict[str, tuple[dict, dict]], dict[str, str]]:
    """({job name: ({parameter: type}, {constexpr: value})}, {job name: problem}): the types of
    the untyped parameters and the values of the valueless constexprs of kernels that the file's
    ``check_inputs()`` launches, and why it gave none for a kernel (it failed, returned something
    of another shape, or arguments that do not fit the kernel).  Empty without such a function."""
    from .check.run import RunSetupError, inputs_hook, launches
    wanting = [job for job in jobs if (_untyped_params(job.kfn, types, constexprs) or _valueless(job.kfn, constexprs))
               and (job.explicit or not _is_helper(job, jobs))]
    if module is None or not wanting or inputs_hook(module) is None:
        return {}, {}
    try:
        found = launches(module, [job.name for job in wanting])
    except RunSetupError as exc:
        return {}, {job.name: str(exc) for job in wanting}
    inferred, problems = {}, {}
    for job in wanting:
        launch = found.get(job.name) or found.get(job.attr)
        if launch is None:
            continue
        _, args, kwargs = launch
        kwargs = {k: v for k, v in kwargs.items() if k in job.kfn.param_names}    # not num_warps=...
        try:
            bound = inspect.signature(job.kfn.fn).bind(*args, **kwargs)
            bound.apply_defaults()
            spec = specialization_from_args(job.kfn, dict(bound.arguments))
        except (TypeError, TlxcError) as exc:
            reason = exc.message if isinstance(exc, TlxcError) else str(exc)
            problems[job.name] = (f"check_inputs() passes arguments that do not fit {job.name}: {reason} "
                                  f"(it returns (grid, args[, kwargs]); see docs/checking.md)")
            continue
        untyped = _untyped_params(job.kfn, types, constexprs)
        found_types = {name: value for name, (kind, value) in spec.params.items()
                       if kind == "runtime" and name in untyped}
        found_constexprs = {name: value for name, (kind, value) in spec.params.items()
                            if kind == "constexpr" and name in job.kfn.constexpr_params and name not in constexprs}
        # an int argument equal to 1 folds in as the constant 1, as the launch check_inputs() describes does
        # (a descriptor's unit stride: tl.make_tensor_descriptor requires it)
        found_constexprs.update({name: value for name, (kind, value) in spec.params.items()
                                 if kind == "constexpr" and name in untyped and type(value) is int})
        inferred[job.name] = (found_types, found_constexprs)
    return inferred, problems


def _lacks_value(kfn, name: str) -> bool:
    """A constexpr parameter without a default."""
    param = kfn.signature.parameters.get(name)
    return param is not None and param.default is inspect.Parameter.empty


def _valueless(kfn, constexprs: dict) -> list[str]:
    return [name for name in kfn.constexpr_params if name not in constexprs and _lacks_value(kfn, name)]


def _untyped_params(kfn, types: dict, constexprs: dict) -> list[str]:
    missing = []
    for name, param in inspect.signature(kfn.fn).parameters.items():
        if is_constexpr_annotation(param.annotation, kfn.fn) or name in constexprs or name in types:
            continue
        if annotation_type(param.annotation, kfn.fn) is None:
            missing.append(name)
    return missing


def _returns_value(kfn) -> bool:
    try:
        tree = kfn.source.tree
    except TlxcError:
        return False
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(tree))


def _is_helper(job: Job, jobs: list[Job]) -> bool:
    """A kernel that returns a value, or that another kernel of the file calls: it is
    inlined into its callers, so compiling it alone is not expected."""
    if _returns_value(job.kfn):
        return True
    names = {job.attr, job.kfn.__name__}
    for other in jobs:
        if other is job:
            continue
        try:
            tree = other.kfn.source.tree
        except TlxcError:
            continue
        if any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
               for node in ast.walk(tree)):
            return True
    return False


# -- commands ------------------------------------------------------------------------------
def _prepare(args, *, quiet: bool = False) -> tuple[list[Job], str, Any]:
    arch = target_arch(args)
    if args.num_warps is not None and args.num_warps not in NUM_WARPS:
        raise UsageError(f"--num-warps must be one of {', '.join(map(str, NUM_WARPS))}, got {args.num_warps}")
    try:
        config_choice = parse_config_choice(getattr(args, "config", None))
    except KernelSetupError as exc:
        raise UsageError(str(exc)) from None
    constexprs = dict(parse_define(d) for d in args.defines)
    try:
        types = parse_signature(args.signature) if args.signature else {}
        hints = signature_hints(args.signature) if args.signature else {}
    except ValueError as exc:
        raise UsageError(f"--signature: {exc}") from None
    module = load_module(args.file)
    jobs = select_jobs(module, args.file, args.kernel, config_choice)
    specialize_jobs(jobs, types, constexprs, hints, module)
    for job in jobs:
        _launch_options(job, args)
    for job in jobs:      # helpers are inlined into kernels: skipped silently
        if job.skip_reason and not quiet and not _is_helper(job, jobs):
            print(f"tlxc: skipping helper {job.name}: {job.skip_reason}", file=sys.stderr)
    skipped = [job for job in jobs if job.spec is None]
    jobs = [job for job in jobs if job.spec is not None]
    if not jobs:
        hook = sorted({job.skip_reason for job in skipped if "check_inputs()" in (job.skip_reason or "")})
        why = f"; {hook[0]}" if hook else ""
        raise UsageError(f"{args.file}: no kernel to compile (every kernel was skipped as a helper; "
                         f"name one with --kernel and give its types){why}")
    return jobs, arch, module


def target_arch(args) -> str:
    """``--arch`` resolved (``sm_90``, ``cuda:90`` -> ``sm_90a``: tlxc/arch.py); without it, the local
    GPU's target, else (``check`` only) sm_90a.  ``args.arch`` becomes the resolved name."""
    written = args.arch
    try:
        if written is None:
            written = local_arch()
            if written is None:
                if args.command == "compile":
                    raise UsageError("--arch is needed: there is no local GPU to take it from (e.g. --arch sm_90a; "
                                     f"accepted: {accepted()})")
                written = DEFAULT_ARCH
        resolved = resolve(written)
    except ArchError as exc:
        raise UsageError(str(exc)) from None
    args.arch = resolved.arch
    args.plain_arch = written if resolved.plain else None
    return resolved.arch


def arch_note(job: Job, compiled, args) -> None:
    """``--arch sm_100`` compiled for ``sm_100a``: say so when the kernel uses what only sm_100a has."""
    written = getattr(args, "plain_arch", None)
    if written is None:
        return
    used = arch_specific_use(compiled.module, compiled.arch)
    if used is not None:
        print(f"tlxc: note: {job.name}: --arch {written} compiles for {compiled.arch}: the kernel uses {used}, "
              f"which only the arch-specific target has (the cubin runs on exactly that compute capability)",
              file=sys.stderr)


def _launch_options(job: Job, args) -> None:
    """num_warps and clusters: the command line's, else the autotune config's, else 4 and none."""
    config = job.config
    job.num_warps = args.num_warps or (config.num_warps if config is not None else 4)
    if job.num_warps not in NUM_WARPS:
        raise UsageError(f"{job.name}: config {job.config_index} has num_warps={job.num_warps}; tlxc takes "
                         f"{', '.join(map(str, NUM_WARPS))}")
    job.cluster = cluster_option(args)
    job.num_ctas = config.num_ctas if config is not None else 1
    if job.cluster is None and config is not None and config.ctas_per_cga is not None:
        from .errors import LaunchError
        from .runtime.launch import cluster_dims
        try:
            job.cluster = cluster_dims(config.ctas_per_cga)
        except LaunchError as exc:
            raise UsageError(f"{job.name}: config {job.config_index}: {exc}") from None


def parse_stages(text: str) -> tuple[str, ...]:
    stages = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    if not stages:
        raise UsageError("--emit needs at least one stage")
    for stage in stages:
        if stage not in STAGES:
            raise UsageError(f"unknown stage '{stage}' for --emit (expected some of {', '.join(STAGES)})")
    return stages


def cluster_option(args):
    """``--ctas-per-cga`` as the (x, y, z) a launch's ``ctas_per_cga`` gives (None: no clusters)."""
    from .errors import LaunchError
    from .runtime.launch import cluster_dims
    if not getattr(args, "ctas_per_cga", None):
        return None
    try:
        return cluster_dims(tuple(int(part) for part in args.ctas_per_cga.split(",")))
    except (ValueError, LaunchError) as exc:
        raise UsageError(f"--ctas-per-cga: {exc}") from None


def cmd_compile(args) -> int:
    stages = parse_stages(args.emit)
    jobs, arch, _module = _prepare(args)
    from .compiler import compile_kernel
    failed = False
    for job in jobs:
        try:
            compiled = compile_kernel(job.kfn, job.spec, arch=arch, num_warps=job.num_warps, stages=stages,
                                      cluster=job.cluster, num_ctas=job.num_ctas)
        except TlxcError as exc:
            print(exc.render(), file=sys.stderr)
            failed = True
            continue
        arch_note(job, compiled, args)
        if "stats" in stages:
            from .compiler import perf_warnings
            for warning in perf_warnings(compiled.metadata):
                print(f"tlxc: warning: {job.name}: {warning}", file=sys.stderr)
        for stage in stages:
            if stage not in compiled.asm:
                raise UsageError(f"stage '{stage}' is not available yet for {arch}")
            job.outputs[stage] = compiled.asm[stage]
    done = [job for job in jobs if job.outputs]
    if args.output_dir is not None:
        write_outputs(done, Path(args.output_dir))
    else:
        print_outputs(done)
    return 1 if failed else 0


def write_outputs(jobs: list[Job], directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create output directory {directory}: {exc.strerror}") from None
    for job in jobs:
        for stage, content in job.outputs.items():
            path = directory / f"{job.stem or job.name}.{stage}"
            if isinstance(content, (bytes, bytearray)):
                path.write_bytes(bytes(content))
            else:
                path.write_text(_as_text(content))


def print_outputs(jobs: list[Job]) -> None:
    for job in jobs:
        for stage, content in job.outputs.items():
            if isinstance(content, (bytes, bytearray)):
                raise UsageError(f"stage '{stage}' is binary: pass -o DIR to write {job.stem or job.name}.{stage}")
    for job in jobs:
        for content in job.outputs.values():
            text = _as_text(content)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    import json
    return json.dumps(content, indent=2, sort_keys=True, default=str) + "\n"


def cmd_check(args) -> int:
    jobs, arch, module = _prepare(args, quiet=True)   # check prints nothing unless something is wrong
    if args.seeds < 1:
        raise UsageError(f"--seeds must be at least 1, got {args.seeds}")
    inputs = _run_inputs(module, jobs) if args.run else {}
    failed = False
    for job in jobs:
        findings = check_job(job, arch, job.num_warps, job.cluster)
        from .check.findings import FAILING, INFO
        for finding in findings:
            if finding.severity != INFO or args.verbose:
                print(finding.render(), file=sys.stderr)
        errors = any(f.severity in FAILING for f in findings)
        failed |= errors
        if args.run and not errors:
            failed |= _run_job(job, inputs, args)
    return 1 if failed else 0


def check_job(job: Job, arch: str, num_warps: int, cluster=None) -> list:
    """Every finding of one kernel (``tlxc.compiler.check_function``)."""
    from .compiler import check_function
    return check_function(job.kfn, job.spec, arch=arch, num_warps=num_warps, cluster=cluster, num_ctas=job.num_ctas)


def _run_inputs(module, jobs: list[Job]) -> dict:
    from .check.run import RunSetupError, launches
    try:
        found = launches(module, [job.name for job in jobs])
    except RunSetupError as exc:
        raise UsageError(str(exc)) from None
    known = {name for attr, kfn in module_kernels(module) for name in (attr, kfn.__name__)}
    unknown = sorted(set(found) - known)
    if unknown:
        raise UsageError(f"check_inputs() names {', '.join(unknown)}, which is no kernel of the file")
    return found


def _run_job(job: Job, inputs: dict, args) -> bool:
    """Run one kernel on the interpreter; True when it misbehaved."""
    from .check.run import SEEDS, run_kernel
    launch = inputs.get(job.name) or inputs.get(job.attr)
    if launch is None:
        if job.explicit:
            print(f"tlxc: --run: check_inputs() has no launch for {job.name}; not run", file=sys.stderr)
        return False
    grid, run_args, kwargs = launch
    kwargs = {**kwargs, **{name: value for name, value in _defines(args).items() if name in job.kfn.param_names}}
    seeds = (SEEDS + tuple(range(len(SEEDS) - 1, args.seeds)))[:args.seeds]
    error = run_kernel(job.kfn, grid, run_args, kwargs, seeds=seeds, num_warps=job.num_warps, arch=args.arch)
    if error is None:
        return False
    print(error.render(), file=sys.stderr)
    return True


def _defines(args) -> dict:
    return dict(parse_define(d) for d in args.defines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, --version, or argparse's own usage error (code 2)
        return exc.code if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "compile":
            return cmd_compile(args)
        if args.command == "trace":
            return cmd_trace(args)
        return cmd_check(args)
    except UsageError as exc:
        print(f"tlxc: {exc}", file=sys.stderr)
        return 2
    except SyntaxError as exc:
        print(_render_syntax_error(exc), file=sys.stderr)
        return 1
    except TlxcError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    except Exception as exc:   # a tlxc bug
        if os.environ.get("TLXC_DEBUG") == "1":
            raise
        print(f"tlxc: internal compiler error ({type(exc).__name__}: {exc}); this is a tlxc bug, "
              f"rerun with TLXC_DEBUG=1 for the traceback", file=sys.stderr)
        return 1


def _render_syntax_error(exc: SyntaxError) -> str:
    from .errors import Location, render_diagnostic
    col = max((exc.offset or 1) - 1, 0)
    loc = Location(exc.filename or "<unknown>", exc.lineno or 0, col)
    line = exc.text.rstrip("\n") if exc.text else None
    return render_diagnostic("error", exc.msg, loc, line)


if __name__ == "__main__":
    sys.exit(main())
