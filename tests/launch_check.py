"""``tlxc check`` of a kernel exactly as an op's host code launches it: the launch is recorded instead
of run (the op's module attribute replaced by a recorder), then checked with the launch's own
arguments and meta-parameters (``check_function``, as ``tlxc check`` does)."""
from __future__ import annotations

import inspect


def record_launch(monkeypatch, module, name: str, call) -> tuple:
    """``(kernel, args, meta)`` of the one launch of ``module.<name>`` that ``call()`` makes."""
    launches = []

    class Recorder:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            return lambda *args, **meta: launches.append((self.kernel, args, meta))
    monkeypatch.setattr(module, name, Recorder(getattr(module, name)))
    call()
    (launch,) = launches
    return launch


def check_findings(kernel, args, meta, cluster=None) -> list:
    """The findings of ``tlxc check`` on ``kernel`` specialized for ``args`` / ``meta`` (launch options
    ``num_warps`` and ``ctas_per_cga`` taken out of ``meta``)."""
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    meta = dict(meta)
    num_warps = meta.pop("num_warps")
    meta.pop("ctas_per_cga", None)
    meta.pop("launch_pdl", None)
    defaults = {n: p.default for n, p in inspect.signature(kernel.fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    params = {**defaults, **dict(zip(kernel.param_names, args)), **meta}
    return check_function(kernel, specialization_from_args(kernel, params), num_warps=num_warps, cluster=cluster)
