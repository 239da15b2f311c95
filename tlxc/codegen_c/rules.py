"""Importing this module registers the shared lowering rules (``codegen_c/lower.py``:
``lowering``): a backend's renderer imports it, then its own rule modules, whose
``@lowering(..., vendor=...)`` rules take the place of shared ones for its vendor."""
from __future__ import annotations

from . import (  # noqa: F401
    rules_arith,
    rules_buffers,
    rules_control,
    rules_debug,
    rules_memory,
    rules_mma,
    rules_scan,
    rules_tensor,
    rules_warp,
)
