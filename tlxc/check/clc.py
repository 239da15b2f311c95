"""Cluster launch control misuse (``frontend/clc_rules.py``): the empty barrier of a CLC
context waits for ``num_consumers`` arrivals per answer, one from every task that calls
``clc_consumer`` in every CTA of the cluster (with ``multi_ctas``).  A count that cannot
match is an error at the first ``clc_consumer``: too many and the producer waits forever for
arrivals nobody makes; too few and a phase completes before every consumer has read the
answer, so the next ``try_cancel`` can overwrite it while a consumer still reads it."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.ops.task import task_region
from ..ir.views import view_roots
from .findings import Finding


def check_clc(kernel: Operation) -> list[Finding]:
    groups: dict[int, list[Operation]] = {}
    for op in kernel.walk():
        if op.name == "tlx.clc_query" and "num_consumers" in op.attrs:
            roots = view_roots(op.operands[0])
            if roots:
                groups.setdefault(id(roots[0]), []).append(op)
    findings = []
    dims = kernel.attrs.get("cluster_dims") or (1, 1, 1)
    for queries in groups.values():
        first = queries[0]
        wanted = first.attrs["num_consumers"]
        ctas = dims[0] * dims[1] * dims[2] if first.attrs.get("multi_ctas") else 1
        tasks = len({id(task_region(q)) for q in queries})
        have = tasks * ctas
        if have != wanted:
            per = f" x {ctas} CTAs of the cluster" if ctas > 1 else ""
            effect = ("the producer's wait on the empty barrier never completes" if have < wanted else
                      "the empty barrier completes before every consumer has read the answer, so the next "
                      "try_cancel can overwrite it while a consumer still reads it")
            stages = first.attrs.get("num_stages")
            if stages == have:
                effect += (" (older TLX took clc_create_context(num_stages, num_consumers): these arguments "
                           "match that order; TLX's current order is (num_consumers, num_stages=1))")
            findings.append(Finding(
                f"tlx.clc_create_context(num_consumers={wanted}) but {tasks} task(s) call clc_consumer on it"
                f"{per} = {have} arrivals per answer: {effect}; pass num_consumers={have}",
                first.loc,
                [(f"a clc_consumer of this context ({len(queries)} in all)", q.loc) for q in queries[:3]],
                check="clc.num-consumers"))
    return findings
