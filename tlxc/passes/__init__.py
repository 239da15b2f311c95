"""Named, pure IR→IR passes run by one driver (``manager.py``)."""
from .manager import Pass, PassManager, default_pipeline  # noqa: F401
