"""``from tlxc.tools.tensor_descriptor import TensorDescriptor``: where Triton code
(``triton.tools.tensor_descriptor``) finds the host TMA descriptor; the class is
``tlxc.TensorDescriptor`` (``tlxc/runtime/tma.py``)."""
from __future__ import annotations

from ..runtime.tma import TensorDescriptor

__all__ = ["TensorDescriptor"]
