"""What the static checker reports.

A ``Finding`` is one diagnostic: a sentence at the user's line, with notes
pointing at the other side of the mismatch.  ``severity`` is ``error``
(certainly wrong: a compile raises it as ``BarrierError`` / ``ResourceError``),
``warning`` (wrong under an assumption the checker had to make), ``note``
(something the checker could not decide; ``tlxc check --run`` decides it on
the interpreter) or ``info`` (a known idiom the checker accepts, e.g. TLX's
named-barrier ping-pong leaving its last hand-off open; printed, as a note,
by ``tlxc check --verbose`` only).  Only errors and warnings make ``tlxc
check`` fail.  ``check`` names the check that produced it (the ids are
listed in ``docs/checking.md``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BarrierError, Location, ResourceError, TlxcError, render_diagnostic

ERROR, WARNING, NOTE, INFO = "error", "warning", "note", "info"
FAILING = (ERROR, WARNING)          # the severities that make `tlxc check` exit 1


@dataclass
class Finding:
    message: str
    loc: Location | None
    notes: list[tuple[str, Location | None]] = field(default_factory=list)
    check: str = ""
    kind: str = "barrier"          # "barrier" or "resource": the error class it raises as
    severity: str = ERROR

    def to_error(self) -> TlxcError:
        cls = ResourceError if self.kind == "resource" else BarrierError
        return cls(self.message, self.loc, self.notes)

    def render(self) -> str:
        if self.severity == ERROR:
            return self.to_error().render()
        parts = [render_diagnostic(NOTE if self.severity == INFO else self.severity, self.message, self.loc)]
        parts += [render_diagnostic("note", text, where) for text, where in self.notes]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()
