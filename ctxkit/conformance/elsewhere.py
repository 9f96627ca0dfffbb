"""``python -m ctxkit.conformance.elsewhere REPORT``: the second process of a split search.

It reads (options, seconds, when the run began) pickled on stdin, runs its share of the search
(:func:`ctxkit.conformance.shards.search_elsewhere`) and writes the report pickled to REPORT.
A module of its own so that the runner, which starts it, does not import itself back.
"""

from __future__ import annotations

import pickle
import sys

from ctxkit.conformance.runner import run
from ctxkit.conformance.shards import search_elsewhere


def main() -> None:
    options, seconds, run_started = pickle.loads(sys.stdin.buffer.read())
    report = search_elsewhere(run, options, seconds, run_started)
    with open(sys.argv[1], "wb") as file:
        pickle.dump(report, file)


if __name__ == "__main__":
    main()
