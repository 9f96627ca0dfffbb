"""``python -m ctxkit``: the same as the ``ctxkit`` command."""

import sys

from ctxkit.cli import main

sys.exit(main())
