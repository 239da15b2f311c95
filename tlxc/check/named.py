"""Static checks of named barriers (``bar.sync`` / ``bar.arrive``).

A named barrier completes a round when ``threads`` threads have arrived; each
task that reaches ``named_barrier_wait`` / ``named_barrier_arrive`` brings all
its threads.  With compile-time ids and counts:

* ids are 0..15, and 0..6 belong to tlxc (0: ``__syncthreads``, 1..6: each
  task's own syncs), so user code takes 7..15 (``named.id``,
  ``named.reserved``);
* a count is a positive multiple of 32, no more than the block's threads and
  either no less than the threads of a task that uses it or a divisor of them
  (the task then fills count-sized rounds by itself) (``named.threads``);
* every use of one id counts the same threads (``named.count-mismatch``);
* the tasks that use an id can bring that many threads at all
  (``named.count``): otherwise every ``bar.sync`` on it waits forever.

Runtime ids and counts are left to the simulation and the interpreter.
"""
from __future__ import annotations

from collections import defaultdict

from ..ir.core import Operation
from ..ir.ops.task import warp_size
from ..ir.traits import NAMED_BARRIER, has_trait
from .events import UNKNOWN, _binary, _wrap
from .findings import Finding

RESERVED = range(7)


def fold(value, depth: int = 8):
    """The compile-time integer value of ``value``, or None."""
    owner = getattr(value, "owner", None)
    if not isinstance(owner, Operation) or depth == 0:
        return None
    if owner.name == "arith.constant":
        v = owner.attrs.get("value")
        return int(v) if isinstance(v, (bool, int)) else None
    if owner.name == "arith.cast" and owner.operands:
        return fold(owner.operands[0], depth - 1)
    if owner.name.startswith("arith.") and len(owner.operands) == 2:
        a, b = (fold(v, depth - 1) for v in owner.operands)
        if a is None or b is None:
            return None
        out = _binary(owner.name.split(".", 1)[1], a, b, owner.results[0].type)
        return None if out is UNKNOWN else _wrap(out, owner.results[0].type)
    return None


def _uses(kernel: Operation) -> list[tuple[Operation, str, int]]:
    """(op, task name, task threads) of every named-barrier op."""
    found = []
    lanes = warp_size(kernel)
    kernel_threads = lanes * kernel.attrs.get("num_warps", 4)

    def visit(op, name, threads):
        if has_trait(op, NAMED_BARRIER):
            found.append((op, name, threads))
        if op.name == "tlx.async_tasks":
            for region, task in zip(op.regions, op.task_infos):
                for inner in region.ops:
                    visit(inner, task.label, task.warps * lanes)
            return
        for region in op.regions:
            for inner in region.ops:
                visit(inner, name, threads)

    for op in kernel.regions[0].ops:
        visit(op, "main", kernel_threads)
    return found


def _how(op: Operation) -> str:
    return "bar.sync" if op.name == "tlx.named_barrier_wait" else "bar.arrive"


def _where(loc) -> str:
    from .describe import where
    return where(loc)


def block_threads(kernel: Operation) -> int:
    for op in kernel.walk():
        if op.name == "tlx.async_tasks":
            return warp_size(kernel) * sum(task.span for task in op.task_infos)
    return warp_size(kernel) * kernel.attrs.get("num_warps", 4)


def check_named(kernel: Operation) -> list[Finding]:
    findings = []
    total = block_threads(kernel)
    by_id = defaultdict(list)
    uses = _uses(kernel)
    if uses and warp_size(kernel) != 32:
        # AMD (wave64) has one barrier of the whole work-group (s_barrier) and no numbered ones
        return [Finding(f"named barriers ({_how(uses[0][0])}) are NVIDIA-only: an AMD work-group has one barrier "
                        f"(s_barrier, tl.debug_barrier) and TLX's LDS mbarriers", uses[0][0].loc, check="named.target")]
    for op, task, threads in uses:
        ident, count = fold(op.operands[0]), fold(op.operands[1])
        if ident is not None and not 0 <= ident <= 15:
            findings.append(Finding(f"named barrier id {ident} is out of range: the hardware has ids 0..15, and "
                                    f"user code takes 7..15", op.loc, check="named.id"))
            continue
        if ident is not None and ident in RESERVED:
            findings.append(Finding(f"named barrier id {ident} is reserved: tlxc uses ids 0..6 itself (0 for "
                                    f"__syncthreads, 1..6 for each task's own syncs); use 7..15", op.loc,
                                    check="named.reserved"))
            continue
        if count is not None:
            problem = None
            if count <= 0 or count % 32:
                problem = "must be a positive multiple of 32 (whole warps arrive)"
            elif count > total:
                problem = f"is more than the {total} threads of the whole block"
            elif count < threads and threads % count:
                # bar.sync counts warps: a task of k * count threads fills k rounds by itself
                # (TLX's 32-thread barrier waited by a 4-warp task); any other split leaves warps waiting
                problem = (f"is fewer than the {threads} threads of task '{task}', which all arrive when it "
                           f"reaches this {_how(op)}, and does not divide them")
            if problem:
                findings.append(Finding(f"named barrier {ident if ident is not None else '?'} counts {count} "
                                        f"threads here ({_how(op)}), which {problem}", op.loc,
                                        check="named.threads"))
                continue
        if ident is not None and count is not None:
            by_id[ident].append((op, task, threads, count))
    for ident, uses in by_id.items():
        findings += _check_id(ident, uses)
    return findings


def _check_id(ident: int, uses: list) -> list[Finding]:
    counts = [count for *_, count in uses]
    synced = [count for op, *_, count in uses if op.name == "tlx.named_barrier_wait"]
    reference = max(set(counts), key=lambda c: (counts.count(c), c in synced))
    first_op, _, _, first_count = next(use for use in uses if use[3] == reference)
    for op, task, _, count in uses:
        if count != first_count:
            return [Finding(f"named barrier {ident} counts {count} threads here ({_how(op)} in task '{task}'), but "
                            f"{first_count} at {_where(first_op.loc)} ({_how(first_op)}): every use of one named "
                            f"barrier must count the same threads", op.loc,
                            [(f"named barrier {ident} counts {first_count} threads here", first_op.loc)],
                            check="named.count-mismatch")]
    participants: dict[str, int] = {}
    for _, task, threads, _ in uses:
        participants.setdefault(task, threads)
    reachable = sum(participants.values())
    count = counts[0]
    if reachable < count and any(op.name == "tlx.named_barrier_wait" for op, *_ in uses):
        who = " and ".join(f"task '{task}' ({threads} threads)" for task, threads in participants.items())
        wait = next(op for op, *_ in uses if op.name == "tlx.named_barrier_wait")
        notes = [(f"task '{task}' uses named barrier {ident} here ({_how(op)})", op.loc) for op, task, *_ in uses
                 if op is not wait]
        return [Finding(f"named barrier {ident} counts {count} threads, but only {who} use it: at most "
                        f"{reachable} threads can arrive in a round, so this bar.sync never returns", wait.loc,
                        notes[:3], check="named.count")]
    return []
