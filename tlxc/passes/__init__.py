"""Named, pure IR→IR passes run by one driver (``manager.py``); the compile driver
(``compiler.default_pipeline(target)``) puts them in order for a target."""
from .manager import Pass, PassManager  # noqa: F401
