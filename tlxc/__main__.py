"""``python -m tlxc``: the same as the ``tlxc`` command."""
import sys

from .cli import main

sys.exit(main())
