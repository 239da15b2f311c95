"""``tlxc.language.extra.cuda.libdevice``: the same functions as ``tlxc.language.extra.libdevice``."""
from __future__ import annotations

from ..libdevice import *
from ..libdevice import __all__, __tlxc_namespace__  # noqa: F401
