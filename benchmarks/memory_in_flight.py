"""Peak resident memory of ``ctxkit audit`` and ``ctxkit replay`` as the number of
conversations grows: what each holds should follow the conversations in flight, not the
conversations read (issue 46, item 3).

The recording is a day of one-shot calls: one-request conversations, each a Chat Completions
body with a ``metadata.conversation_id``, a system and a user message
(``tests.audit_fleet.one_request_lines``), at each size of ``--sizes``. Each command runs the
CLI in a fresh process, in-process there, writing its JSON report; its peak is that process's
VmHWM:

* audit: ``ctxkit audit FILE --report-json OUT``;
* replay: ``ctxkit replay FILE --manager keep=tests.replay_managers:everything
  --report-json OUT``.

Goal (issue 46): at most 1.25x the peak for 10x the conversations.

    nice python benchmarks/memory_in_flight.py [--sizes 20000 200000] [--commands audit replay]
        [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.audit_fleet import one_request_lines  # noqa: E402

COMMANDS = {
    "audit": ["audit", "{file}", "--report-json", "{out}"],
    "replay": [
        "replay",
        "{file}",
        "--manager",
        "keep=tests.replay_managers:everything",
        "--report-json",
        "{out}",
    ],
}
"""Each command's arguments; ``{file}`` the recording, ``{out}`` the report."""

GOAL = 1.25
"""The peak at the largest size over the peak at the smallest, at most (for 10x)."""

_PEAK = """
import os, re, sys, contextlib
from ctxkit.cli import main
with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
    code = main(sys.argv[1:])
# VmHWM, not ru_maxrss: the latter keeps the peak of the process this one was forked from.
print(code, re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def peak(arguments: list[str]) -> tuple[int, float, float]:
    """The CLI run with ``arguments`` in a fresh process: its exit code, peak resident
    memory in MiB, and wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"{' '.join(arguments)} failed:\n{done.stderr}")
    code, kib = done.stdout.split()[-2:]
    return int(code), int(kib) / 1024, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[20_000, 200_000], metavar="N")
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as scratch:  # gone when done
        return measure(args, Path(scratch))


def measure(args: argparse.Namespace, folder: Path) -> int:
    files = {}
    for size in args.sizes:
        files[size] = folder / f"one-shots-{size}.jsonl"
        with files[size].open("w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in one_request_lines(size))
    small, large = args.sizes
    print(
        f"peak resident memory, {small:,} and {large:,} one-request conversations "
        f"({platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()})"
    )
    print(f"| command | {small:,} | {large:,} | ratio | seconds |")
    print("| --- | --- | --- | --- | --- |")
    results = {}
    for command in args.commands:
        figures = {}
        for size in args.sizes:
            out = folder / f"{command}-{size}.json"
            arguments = [a.format(file=files[size], out=out) for a in COMMANDS[command]]
            code, mib, seconds = peak(arguments)
            report = json.loads(out.read_text())
            figures[size] = {"exit_code": code, "peak_mib": mib, "seconds": seconds}
            if command == "audit":
                assert len(report["conversations"]) == size, "every conversation reported"
        ratio = figures[large]["peak_mib"] / figures[small]["peak_mib"]
        verdict = "met" if ratio <= GOAL else "missed"
        print(
            f"| `ctxkit {command}` | {figures[small]['peak_mib']:.1f} MiB "
            f"| {figures[large]['peak_mib']:.1f} MiB | {ratio:.2f}x (goal: at most {GOAL}x; "
            f"{verdict}) | {figures[small]['seconds']:.0f} / {figures[large]['seconds']:.0f} |"
        )
        results[command] = {"sizes": {str(s): f for s, f in figures.items()}, "ratio": ratio}
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
