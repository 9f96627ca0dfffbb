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

    python benchmarks/replay.py [--conversations N] [--requests N] [--messages N] [--json F]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.audit import Auditor  # noqa: E402
from ctxkit.audit.files import Reading  # noqa: E402
from ctxkit.replay.run import ManagerSpec  # noqa: E402
from ctxkit.replay.session import Options, conversations_of, replay  # noqa: E402

RECORDED = ManagerSpec("recorded", "recorded")
REFERENCE = ManagerSpec("reference", "ctxkit.reference:mount")
FUNCTION = ManagerSpec("everything", "tests.replay_managers:everything")


def _fleet_lines(conversations: int, requests: int, messages: int) -> list[str]:
    """The audit benchmark's recording (one definition of the fleet, not two)."""
    spec = importlib.util.spec_from_file_location("audit_bench", ROOT / "benchmarks" / "audit.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.exports(conversations, requests, messages)


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
    os.chdir(ROOT)  # the function target is imported from the current folder, as the CLI does
    folder = Path(tempfile.mkdtemp(prefix="ctxkit-bench-"))
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
            conversations = conversations_of(Reading([str(recording)]))
            results = replay(conversations, [RECORDED, *specs], Options(), jobs=jobs)
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
    if args.json is not None:
        args.json.write_text(
            json.dumps({"seconds": seconds, "requests": total, "jobs_2_speedup": speedup}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
