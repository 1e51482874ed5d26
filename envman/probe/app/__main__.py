"""``python -m envman.probe.app``: run the probe from a source checkout (in an image it runs
as ``python /opt/envman/probe.pyz``, whose own ``__main__`` does the same)."""

import sys

from .cli import entry

sys.exit(entry())
