"""The C-style code generator shared by the CUDA and HIP backends.

``lower.py`` walks a kernel's IR (after layout inference) and renders one
rule per op (``rules_*.py``, grouped by the IR's domains); everything that
differs between CUDA and HIP goes through a ``Target`` table (``target.py``).
"""
