"""The pass driver.

``TLXC_PRINT_AFTER=infer-layouts`` (or ``all``) prints the IR after the named
passes; ``TLXC_VERIFY_EACH=1`` verifies after every pass (on in tests).  An
exception escaping a pass is prefixed with the pass name.

``TLXC_SKIP_PASSES=name[,name...]`` leaves out optimization passes (those in
``OPTIONAL_PASSES``: the code is correct without them, only slower), to bisect a
wrong result or a slowdown to one pass.  A name that is not an optional pass is an
error.  The disk cache keys on the variable; set it before a kernel's first launch.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InternalCompilerError, TlxcError
from ..ir.core import Module
from ..ir.printer import print_module
from ..ir.verifier import verify_module

# Passes whose absence changes speed, never results (tl.dot then stays on mma.sync, loads
# synchronous, conversions where infer-layouts put them).
OPTIONAL_PASSES = ("fold-dot-add", "lower-dot-to-wgmma", "pipeline-loads", "drain-dot-wait",
                   "hoist-operand-stores", "dedupe-operand-stores", "pipeline-operand-loads",
                   "register-a-operand", "share-operand-buffers", "hoist-conversions", "load-in-use-layout",
                   "fuse-dot-pairs")


def skipped_passes() -> frozenset[str]:
    """The optimization passes ``TLXC_SKIP_PASSES`` leaves out (an unknown name is an error)."""
    names = frozenset(n.strip() for n in os.environ.get("TLXC_SKIP_PASSES", "").split(",") if n.strip())
    unknown = sorted(names - set(OPTIONAL_PASSES))
    if unknown:
        raise TlxcError(f"TLXC_SKIP_PASSES: {', '.join(unknown)} is not an optimization pass that can be "
                        f"skipped; those are: {', '.join(OPTIONAL_PASSES)}")
    return names


@dataclass(frozen=True)
class Pass:
    """A named IR → IR rewrite.  Each pass is a frozen dataclass whose fields are its own
    options (``PipelineLoads(num_stages=3)``), set by the pipeline that builds it
    (``compiler.default_pipeline(target, options)``); the facts every pass shares (the
    target, ``num_warps``, the cluster) come from the ``CompileOptions`` handed to ``run``."""
    name: ClassVar[str] = "unnamed"

    def run(self, module: Module, options) -> Module:
        raise NotImplementedError


class PassManager:
    def __init__(self, passes: list[Pass]):
        self.passes = passes

    def run(self, module: Module, options) -> Module:
        print_after = set(filter(None, os.environ.get("TLXC_PRINT_AFTER", "").split(",")))
        verify_each = os.environ.get("TLXC_VERIFY_EACH") == "1"
        skipped = skipped_passes()
        for p in self.passes:
            if p.name in skipped:
                continue
            try:
                module = p.run(module, options)
                if verify_each:
                    verify_module(module)
            except TlxcError as exc:
                if not exc.message.startswith(f"[{p.name}]"):
                    exc.message = f"[{p.name}] {exc.message}"
                    exc.args = (exc.render(),)
                raise
            except Exception as exc:
                if os.environ.get("TLXC_DEBUG") == "1":
                    raise
                raise InternalCompilerError(
                    f"[{p.name}] internal compiler error: {type(exc).__name__}: {exc} "
                    f"(this is a tlxc bug; rerun with TLXC_DEBUG=1 for the traceback)") from None
            if p.name in print_after or "all" in print_after:
                sys.stderr.write(f"// ----- IR after {p.name} -----\n{print_module(module)}")
        return module
