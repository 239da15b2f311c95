"""Program-order checks of asynchronous shared-memory and MMA use, per task
(no simulation needed):

* ``wgmma.result-before-wait``: the result of a ``tlx.async_dot`` used by an
  op other than ``async_dot_wait`` or another ``async_dot`` (as its ``acc``)
  or a loop's carried value: the tensor cores may still be writing those
  registers;
* ``tma.missing-fence`` (info, shown by ``tlxc check --verbose``): a
  ``local_store`` to a buffer followed, in the same task, by an
  ``async_descriptor_store`` from that buffer with no ``tlx.fence("async_shared")``
  in between.  The TMA engine (async proxy) would not see the generic-proxy
  stores; as Triton does for TLX, the codegen inserts the fence there
  (``codegen_c/shared_order.py``), so the note only says where it went;
* ``tma.store-in-flight-at-exit`` (info, shown by ``tlxc check --verbose``): a
  task (or the kernel) can end with an ``async_descriptor_store`` whose read of
  shared memory no ``async_descriptor_store_wait(0)`` has waited for.  The CTA's
  shared memory is released at exit (possibly to the next CTA), and PTX does not
  promise that exit waits for bulk async-groups; TLX's tutorials rely on ending
  without the wait, so the codegen waits at the kernel's end
  (``codegen_nvptx/rules_tlx.py: wait_stores_at_exit``) and the note says so.  A
  may-analysis over the structured control flow: a loop may run zero or more
  times, either branch of an ``if`` may run.
"""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.traits import BULK_STORE, CONTROL_FLOW, TERMINATOR, has_trait
from ..ir.views import view_roots
from .findings import INFO, Finding

# the TLX spelling of each bulk store (one thread's copies out of shared memory, through the async proxy)
SPELLING = {"tlx.async_descriptor_store": "async_descriptor_store", "tlx.async_bulk_store": "async_store"}


def check_async_order(kernel: Operation) -> list[Finding]:
    findings = _early_results(kernel)
    _missing_fences(kernel.regions[0].block, {}, findings)
    _stores_in_flight_at_exit(kernel.regions[0].block, findings)
    return findings


def _stores_in_flight_at_exit(block, findings: list) -> None:
    """Each task's region, and the kernel body around the tasks, must not end with a TMA
    store still reading shared memory."""
    for op in block.ops:
        if op.name == "tlx.async_tasks":
            for region in op.regions:
                _report_in_flight(_store_state(region.block, None), findings)
    _report_in_flight(_store_state(block, None), findings)


def _report_in_flight(store, findings: list) -> None:
    if store is None or any(f.check == "tma.store-in-flight-at-exit" and f.loc == store.loc for f in findings):
        return                          # (replicated tasks share their source: one finding)
    findings.append(Finding(
        "a TMA store may still be reading shared memory when its task ends; the CTA's shared memory is "
        "released at exit, so tlxc waits for the store's reads at the kernel's end "
        "(cp.async.bulk.wait_group.read 0, as for a tlx.async_descriptor_store_wait(0) after the last "
        "async_descriptor_store)", store.loc, [], "tma.store-in-flight-at-exit", severity=INFO))


def _store_state(block, pending):
    """The TMA store that may be in flight after ``block`` (or None), given ``pending`` before it;
    task regions are analysed on their own."""
    for op in block.ops:
        if op.name == "tlx.async_tasks":
            continue
        if has_trait(op, BULK_STORE):
            pending = op
        elif op.name == "tlx.async_descriptor_store_wait":
            if op.attrs.get("pendings", 0) == 0:
                pending = None
        elif op.name == "scf.if":
            branches = [_store_state(region.block, pending) for region in op.regions]
            if len(branches) == 1:              # no else: the condition may be false
                branches.append(pending)
            pending = next((b for b in branches if b is not None), None)
        elif op.regions:                        # loops: zero, one or more iterations
            after_one = [_store_state(region.block, pending) for region in op.regions]
            after_two = [_store_state(region.block, a or pending) for region, a in zip(op.regions, after_one)]
            pending = next((b for b in [pending] + after_one + after_two if b is not None), None)
    return pending


def _early_results(kernel: Operation) -> list[Finding]:
    findings = []
    for op in kernel.walk():
        if has_trait(op, CONTROL_FLOW) or has_trait(op, TERMINATOR) or op.name == "tlx.async_dot_wait":
            continue
        for index, operand in enumerate(op.operands):
            owner = getattr(operand, "owner", None)
            if not isinstance(owner, Operation) or owner.name != "tlx.async_dot":
                continue
            if op.name == "tlx.async_dot" and index == 2:
                continue                  # chained accumulation: wgmma orders it
            findings.append(Finding(
                f"async_dot result used before async_dot_wait: {op.name} reads the accumulator of the async_dot "
                f"at line {owner.loc.line if owner.loc else '?'} while the tensor cores may still be writing it; "
                f"retire it first (acc = tlx.async_dot_wait(0, acc))", op.loc,
                [("the async_dot is issued here", owner.loc)], "wgmma.result-before-wait"))
            break
    return findings


def _root(value):
    """The ``tlx.local_alloc`` a buffer view comes from (or None); a view reassigned in a
    loop or an ``if`` is followed to the values that flow into it."""
    roots = [r for r in view_roots(value) if r.name == "tlx.local_alloc"]
    return roots[0] if roots else None


def _missing_fences(block, stored: dict, findings: list) -> None:
    """``stored``: alloc op → the local_store not yet fenced, in program order."""
    for op in block.ops:
        if op.name == "tlx.async_tasks":
            for region in op.regions:
                _missing_fences(region.block, dict(stored), findings)
            continue
        if op.regions:
            for region in op.regions:
                _missing_fences(region.block, stored, findings)
            continue
        if op.name == "tlx.fence" and op.attrs.get("scope") == "async_shared":
            stored.clear()
        elif op.name == "tlx.local_store":
            root = _root(op.operands[0])
            if root is not None:
                stored[root] = op
        elif has_trait(op, BULK_STORE):
            store = stored.get(_root(op.operands[1]))
            if store is not None:
                name = store.operands[0].name_hint or "the buffer"
                findings.append(Finding(
                    f"{SPELLING[op.name]} reads a buffer that local_store wrote (line "
                    f"{store.loc.line if store.loc else '?'}) with no tlx.fence(\"async_shared\") in between: the TMA "
                    f"engine reads shared memory through the async proxy, so tlxc inserts the proxy fence right "
                    f"before this store (as Triton does for TLX); write tlx.fence(\"async_shared\") after the last "
                    f"local_store to make it explicit", op.loc,
                    [(f"the local_store to {name} is here", store.loc)], "tma.missing-fence", severity=INFO))
                del stored[_root(op.operands[1])]
