"""``tlxc.language.extra.libdevice`` (also ``...extra.cuda.libdevice``): Triton's libdevice.

``from tlxc.language.extra import libdevice`` then ``libdevice.tanh(x)``, ``libdevice.pow(x, y)``,
... inside a kernel.  Parameters are named ``arg0, arg1, ...`` as in Triton.  The functions
tlxc implements, their CUDA lowering and the interpreter's tolerance are listed in
docs/language.md; an unknown name is a compile error listing these.
"""
from __future__ import annotations

from ..math import LIBDEVICE, define

__tlxc_namespace__ = define("libdevice", LIBDEVICE, globals())
__all__ = list(__tlxc_namespace__)
