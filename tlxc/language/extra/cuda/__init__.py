"""``tlxc.language.extra.cuda`` (Triton's ``triton.language.extra.cuda``)."""
from . import libdevice  # noqa: F401
