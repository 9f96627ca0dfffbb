"""How fast ``ctxkit replay`` replays recorded conversations, beside the audit of the same
recording, on one core; and what ``--jobs 2`` gains on two.

The recording is ``benchmarks/audit.py``'s fleet (agent loops with tool calls, each request the
newest ``--messages`` messages, as OTLP/JSON lines). Runs over the same file:

* audit: read, key and check every request (``ctxkit audit``'s work);
* replay recorded: read, rebuild each conversation, and measure the recorded views (the
  floor of any replay: what ``recorded`` costs);
* replay function: ``recorded`` and a function target that keeps everything;
* replay reference: ``recorded`` and the reference manager (``reference``), each in a fresh
  instance per conversation;
* replay reference, ``--jobs 2``: the same in two worker processes.

Goal (issue 33): replay through the reference manager at most 3x the audit on one core.

Memory: the peak resident memory of a process replaying, through the reference manager, a
recording of ``--conversations`` and one of twice as many, each conversation's requests in a
row (a fleet whose conversations end as others begin): what is held is the conversations in
flight, so the two peaks should be about the same.

    python benchmarks/replay.py [--conversations N] [--requests N] [--messages N] [--json F]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.audit import Auditor  # noqa: E402
from ctxkit.audit.files import Reading  # noqa: E402
from ctxkit.replay.run import ManagerSpec  # noqa: E402
from ctxkit.replay.session import Options, Recording, replay  # noqa: E402

RECORDED = ManagerSpec("recorded", "recorded")
REFERENCE = ManagerSpec("reference", "ctxkit.reference:mount")
FUNCTION = ManagerSpec("everything", "tests.replay_managers:everything")


@functools.cache
def _audit_bench() -> Any:
    """``benchmarks/audit.py``, whose fleet this measures too (one definition of it, not two)."""
    spec = importlib.util.spec_from_file_location("audit_bench", ROOT / "benchmarks" / "audit.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fleet_lines(conversations: int, requests: int, messages: int) -> list[str]:
    return _audit_bench().exports(conversations, requests, messages)


_PEAK = """
import re, sys
from ctxkit.replay.run import ManagerSpec
from ctxkit.replay.session import Options, Recording, replay
recording = Recording([sys.argv[1]])
managers = [ManagerSpec("recorded", "recorded"), ManagerSpec("reference", "ctxkit.reference:mount")]
replay(recording, managers, Options(), total=recording.conversations)
# VmHWM, not ru_maxrss: the latter keeps the peak of the process this one was forked from.
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def _sequential_lines(conversations: int, requests: int, messages: int) -> list[str]:
    """The fleet's conversations as request bodies, each conversation's requests in a row, one
    conversation after another (as a long recording of conversations that end holds them)."""
    bench = _audit_bench()
    lines = []
    for number in range(conversations):
        for index, view in enumerate(bench.conversation(number, requests, messages)):
            body = {
                "model": "gpt-4o",
                "messages": view,
                "metadata": {"conversation_id": f"c{number}"},
            }
            stamp = 1_760_000_000_000_000_000 + (number * requests + index) * 1_000_000
            lines.append(json.dumps({"timestamp": stamp, "body": body}))
    return lines


def peak_mib(path: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return int(done.stdout.split()[-1]) / 1024


def _best(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--requests", type=int, default=20, help="per conversation")
    parser.add_argument("--messages", type=int, default=20, help="per request")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as scratch:  # gone when done
        return measure(args, Path(scratch))


def measure(args: argparse.Namespace, folder: Path) -> int:
    os.chdir(ROOT)  # the function target is imported from the current folder, as the CLI does
    recording = folder / "fleet.jsonl"
    recording.write_text("\n".join(_fleet_lines(args.conversations, args.requests, args.messages)))
    total = args.conversations * args.requests

    def audit() -> None:
        auditor = Auditor()
        for request in Reading([str(recording)]):
            auditor.add(request)
            request.messages = []
        assert auditor.requests == total

    def replayed(*specs: ManagerSpec, jobs: int = 1) -> Callable[[], None]:
        def run() -> None:
            conversations = Recording([str(recording)])
            count = conversations.conversations
            managers = [RECORDED, *specs]
            results, _ = replay(conversations, managers, Options(), jobs=jobs, total=count)
            for spec in (RECORDED, *specs):
                assert sum(r.requests for r in results[spec.name]) == total, spec.name
                assert not any(r.error for r in results[spec.name]), spec.name

        return run

    runs = {
        "audit": audit,
        "replay recorded": replayed(),
        "replay function": replayed(FUNCTION),
        "replay reference": replayed(REFERENCE),
        "replay reference --jobs 2": replayed(REFERENCE, jobs=2),
    }
    seconds = {name: _best(run, args.repeat) for name, run in runs.items()}
    base = seconds["audit"]
    print(
        f"{args.conversations} conversations x {args.requests} requests x {args.messages} "
        f"messages ({total:,} requests), best of {args.repeat}, on {platform.machine()} "
        f"with {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"{'run':<28}{'seconds':>9}{'conv/s':>9}{'req/s':>9}{'x audit':>9}")
    for name, took in seconds.items():
        print(
            f"{name:<28}{took:>9.2f}{args.conversations / took:>9.1f}{total / took:>9.0f}"
            f"{took / base:>9.2f}"
        )
    speedup = seconds["replay reference"] / seconds["replay reference --jobs 2"]
    print(f"--jobs 2 speed-up over one process: {speedup:.2f}x")
    goal = seconds["replay reference"] / base
    print(f"replay through the reference manager: {goal:.2f}x the audit (goal: at most 3x)")
    peaks = []
    for times in (1, 2):
        path = folder / f"sequential{times}.jsonl"
        lines = _sequential_lines(times * args.conversations, args.requests, args.messages)
        path.write_text("\n".join(lines))
        peaks.append(peak_mib(path))
    print(
        f"peak memory replaying {args.conversations} and {2 * args.conversations} conversations "
        f"one after another: {peaks[0]:.1f} MiB and {peaks[1]:.1f} MiB "
        f"({peaks[1] / peaks[0]:.2f}x)"
    )
    if args.json is not None:
        figures = {"seconds": seconds, "requests": total, "jobs_2_speedup": speedup}
        args.json.write_text(json.dumps({**figures, "peak_mib": peaks}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
