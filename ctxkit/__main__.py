"""``python -m ctxkit``: the same as the ``ctxkit`` command."""

import sys

from ctxkit.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    sys.exit(main())
