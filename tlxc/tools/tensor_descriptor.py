"""``from tlxc.tools.tensor_descriptor import TensorDescriptor``: where Triton code
(``triton.tools.tensor_descriptor``) finds the host TMA descriptor; the class is
``tlxc.TensorDescriptor`` (``tlxc/descriptors.py``)."""
from __future__ import annotations

from ..descriptors import TensorDescriptor

__all__ = ["TensorDescriptor"]
