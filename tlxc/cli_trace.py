"""``tlxc trace``: draw the pipeline timeline of one program of a kernel.

    tlxc trace examples/ws_rmsnorm.py -o timeline.html
    tlxc trace tests/kernels_ws.py --kernel rowsum_ws -D BUG=2 -o deadlock.svg

The launch comes from FILE's ``check_inputs()`` (the inputs hook that ``tlxc
check`` reads too; its former name ``trace_inputs`` is still read), which
returns ``(grid, args, kwargs)`` (small CPU tensors), or a dict of them by
kernel name; ``check_inputs(kernel_name)`` when it takes a parameter.  ``-D NAME=VALUE`` sets or
overrides a keyword argument (a constexpr), ``--grid`` the grid.  Exit codes:
0 the program ran to its end; 1 it deadlocked or failed (the timeline is
written all the same, the diagnosis goes to stderr); 2 a bad command line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_trace_parser(commands) -> None:
    """The ``trace`` subcommand, for ``cli.build_parser``."""
    cmd = commands.add_parser(
        "trace", help="run one program in the interpreter and draw its pipeline timeline",
        description="Run one program of a kernel of FILE on the CPU interpreter and draw, per warp-group\n"
                    "task, when it computes, issues cp.async copies, waits on which barrier and phase (and\n"
                    "for how long), arrives, and when each barrier phase completes. The launch comes from\n"
                    "FILE's check_inputs() -> (grid, args, kwargs). A deadlocked run is drawn up to the\n"
                    "deadlock, its stuck waits in red.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  tlxc trace examples/ws_rmsnorm.py -o timeline.html\n"
               "  tlxc trace examples/ws_rmsnorm.py --seed 3 -o timeline.svg\n"
               "  tlxc trace tests/kernels_ws.py --kernel rowsum_ws -D BUG=2 -o deadlock.html")
    cmd.add_argument("file", metavar="FILE.py", help="Python file defining the kernel and check_inputs()")
    cmd.add_argument("--kernel", metavar="NAME", help="the kernel to trace (needed when FILE has several)")
    cmd.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                     help="set a keyword argument of the launch (a constexpr): a Python literal or a dtype; "
                          "repeatable")
    cmd.add_argument("--grid", metavar="X[,Y[,Z]]", help="override the grid of check_inputs()")
    cmd.add_argument("--program", default="0,0,0", metavar="X[,Y,Z]",
                     help="the program to trace (default: 0,0,0); only it runs")
    cmd.add_argument("--seed", type=int, metavar="K",
                     help="a seeded interleaving of the tasks (default: round-robin, each task runs until it "
                          "blocks)")
    cmd.add_argument("--max-steps", type=int, default=20000, metavar="N",
                     help="stop after N scheduling steps (default: 20000)")
    cmd.add_argument("-o", "--output", required=True, metavar="OUT",
                     help="the timeline: OUT.html (interactive) or OUT.svg")


def cmd_trace(args) -> int:
    from .cli_kernels import UsageError, load_module, parse_define
    from .errors import LaunchError, TlxcError
    from .trace_render import trace, write_timeline

    suffix = Path(args.output).suffix.lower()
    if suffix not in (".html", ".htm", ".svg"):
        raise UsageError(f"-o {args.output}: the timeline is written as .html or .svg")
    defines = dict(parse_define(d) for d in args.defines)
    module = load_module(args.file)
    kernel = _select_kernel(module, args.file, args.kernel, UsageError)
    grid, call_args, kwargs = _inputs(module, args.file, kernel, UsageError)
    unknown = sorted(name for name in defines if name not in kernel.param_names)
    if unknown:
        raise UsageError(f"-D names {', '.join(unknown)}, which is no parameter of {kernel.__name__}")
    kwargs.update(defines)
    if args.grid is not None:
        grid = _ints(args.grid, "--grid", UsageError)
    program = _ints(args.program, "--program", UsageError)
    try:
        result = trace(kernel, grid, call_args, kwargs, None, program=program, seed=args.seed,
                       max_steps=args.max_steps)
    except LaunchError as exc:    # the launch itself is wrong (arguments, grid, program)
        raise UsageError(exc.message) from None
    except TlxcError as exc:      # the kernel does not compile
        print(exc.render(), file=sys.stderr)
        return 1
    try:
        write_timeline(result, args.output)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror}") from None
    waits = sum(1 for e in result.events if e.blocked)
    print(f"tlxc: wrote {args.output}: {result.kernel}, program {program_text(result.program)}, "
          f"{len(result.tasks)} tasks, {len(result.barriers)} barriers, {result.steps} steps, {waits} blocked waits"
          + ("" if result.error is None else ", deadlocked" if result.deadlocked else ", stopped by an error"),
          file=sys.stderr)
    if result.error is not None:
        print(result.error.render(), file=sys.stderr)
        return 1
    return 0


def program_text(pid) -> str:
    return "(" + ", ".join(str(p) for p in pid) + ")"


def _select_kernel(module, path: str, name: str | None, usage_error):
    from .cli_kernels import module_kernels
    kernels = module_kernels(module)
    if not kernels:
        raise usage_error(f"{path} defines no @tlxc.kernel function")
    if name is not None:
        for attr, kfn in kernels:
            if name in (attr, kfn.__name__):
                return kfn
        known = ", ".join(kfn.__name__ for _, kfn in kernels)
        raise usage_error(f"{path} has no kernel named '{name}' (kernels: {known})")
    if len(kernels) > 1:
        known = ", ".join(kfn.__name__ for _, kfn in kernels)
        raise usage_error(f"{path} defines several kernels ({known}): name one with --kernel")
    return kernels[0][1]


def _inputs(module, path: str, kernel, usage_error) -> tuple:
    """The launch of FILE's ``check_inputs()`` (``tlxc/check/run.py``: the one inputs hook, also read
    under its former name ``trace_inputs``) for ``kernel``."""
    from .check.run import RunSetupError, call_inputs_hook, inputs_hook
    make = inputs_hook(module)
    if make is None:
        raise usage_error(f"{path} has no check_inputs(): define one returning (grid, args, kwargs) for a small "
                          f"launch on CPU tensors (see docs/interpreter.md, 'Pipeline timeline')")
    try:
        inputs = call_inputs_hook(make, kernel.__name__)
    except RunSetupError as exc:
        raise usage_error(f"{path}: {exc}") from None
    if isinstance(inputs, dict):             # {kernel name: launch}, as 'tlxc check --run' takes it
        inputs = inputs.get(kernel.__name__)
    if not isinstance(inputs, tuple) or len(inputs) not in (2, 3):
        raise usage_error(f"{make.__name__}() of {path} must return (grid, args, kwargs) or (grid, args) for "
                          f"{kernel.__name__}, got {type(inputs).__name__}")
    grid, call_args = inputs[0], tuple(inputs[1])
    kwargs = dict(inputs[2]) if len(inputs) == 3 and inputs[2] is not None else {}
    return grid, call_args, kwargs


def _ints(text: str, option: str, usage_error) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not 1 <= len(values) <= 3 or any(v < 0 for v in values):
        raise usage_error(f"{option} expects one to three non-negative integers, X[,Y[,Z]], got '{text}'")
    return values
