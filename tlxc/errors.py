"""The one error hierarchy of tlxc.

Every error a user can cause renders as ``file.py:LINE:COL: error: <sentence>``,
followed by the source line and a caret under the span, plus optional notes
that point at the other side of a mismatch.  Internal frames are hidden unless
``TLXC_DEBUG=1`` (see ``tlxc/__init__.py``).
"""
from __future__ import annotations

import linecache
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in the user's source: 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}:{self.col}"

    def source_line(self) -> str | None:
        text = linecache.getline(self.file, self.line)
        return text.rstrip("\n") if text else None


UNKNOWN_LOC = Location("<unknown>", 0, 0)


def render_diagnostic(kind: str, message: str, loc: Location | None,
                      source_line: str | None = None) -> str:
    """``file:line:col: kind: message`` + source line + ``^~~~`` caret."""
    if loc is None or loc.line <= 0:
        return f"{kind}: {message}"
    head = f"{loc.file}:{loc.line}:{loc.col}: {kind}: {message}"
    text = source_line if source_line is not None else loc.source_line()
    if text is None:
        return head
    width = 1
    if loc.end_col is not None and loc.end_col > loc.col:
        width = loc.end_col - loc.col
    caret = " " * loc.col + "^" + "~" * (width - 1)
    return f"{head}\n{text}\n{caret}"


class TlxcError(Exception):
    """Base of every error tlxc raises on purpose."""

    kind = "error"

    def __init__(self, message: str, loc: Location | None = None,
                 notes: list[tuple[str, Location | None]] | None = None,
                 source_line: str | None = None):
        self.message = message
        self.loc = loc
        self.notes = list(notes or [])
        self.source_line = source_line
        super().__init__(self.render())

    def render(self) -> str:
        parts = [render_diagnostic(self.kind, self.message, self.loc, self.source_line)]
        for text, where in self.notes:
            parts.append(render_diagnostic("note", text, where))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()

    @property
    def error_message(self) -> str:
        """The message without its location (Triton's ``CompilationError.error_message``)."""
        return self.message


class CompilationError(TlxcError):
    """The kernel's source cannot be compiled as written."""


class CompileTimeAssertionFailure(CompilationError):
    """A ``tl.static_assert`` of the kernel failed (Triton's class of this name): the kernel's own
    refusal of these constants; an autotuner skips such a config without a warning, as Triton's does."""


class LayoutError(CompilationError):
    """No register/shared layout satisfies the ops' constraints."""


class BarrierError(CompilationError):
    """A barrier protocol is wrong (static check or interpreter)."""


class ResourceError(CompilationError):
    """Shared memory, tensor memory, registers or barriers exceed the target."""


class VerificationError(TlxcError):
    """The IR is malformed: a tlxc bug unless the IR was written by hand."""


class InternalCompilerError(TlxcError):
    """A tlxc bug: NVRTC/hipRTC rejected generated code, a pass crashed, ..."""


class LaunchError(TlxcError):
    """The arguments of a launch do not fit the kernel; nothing was launched."""


class InterpreterError(TlxcError):
    """A kernel misbehaved under the interpreter (out of bounds, deadlock, race)."""


class DeadlockError(InterpreterError):
    """Every live task of a program is blocked."""


class RaceError(InterpreterError):
    """An asynchronous write or read was not ordered by a barrier."""


class CudaError(TlxcError):
    """A CUDA driver call failed."""


class PerformanceWarning(UserWarning):
    """A kernel compiled for a launch will run far below its speed: ptxas serialized its wgmma
    instructions (each MMA waits for the one before), or the lowering dropped a hint it could not
    honour.  Issued once per compiled specialization; ``warnings.simplefilter("ignore",
    tlxc.PerformanceWarning)`` silences it."""
