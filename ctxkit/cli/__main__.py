"""``python -m ctxkit.cli``: the same as ``ctxkit``."""

import sys

from ctxkit.cli import main

sys.exit(main())
