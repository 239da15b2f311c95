"""``tlxc.language.extra`` (Triton's ``triton.language.extra``): ``libdevice`` and ``cuda``."""
from . import cuda, libdevice  # noqa: F401
