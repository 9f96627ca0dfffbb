"""How fast the conformance suite decides, and how good its findings are, on this machine.

* wall time of a whole run with the default options, per passing target (goal <= 60 s), and
  on a deliberately slow target whose every view takes 3 s (goal: a verdict, not an error,
  within the deadline);
* for each broken manager of the zoo: time to its first failure (goal: median <= 10 s), the
  counterexample's size after shrinking and minimizing (goal: median <= 3 messages, 9 of 10
  <= 6), and whether its reproducer was verified in a fresh process (goal: all).

    python benchmarks/conformance_suite.py              # from the repository root
    python benchmarks/conformance_suite.py --profile quick --only SplitsPairsOpenAI
    python benchmarks/conformance_suite.py --skip-slow  # leave out the 5-minute slow run
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.conformance.runner import RunOptions, run  # noqa: E402
from tests.zoo import ZOO  # noqa: E402

PASSING = ["ctxkit.reference:mount", "tests.zoo.base:GoodManager"]
SLOW = "tests.zoo.misc:SlowViews"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["quick", "default", "thorough"])
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--only", help="run only zoo members whose target contains this")
    parser.add_argument("--skip-slow", action="store_true", help="leave out the slow target")
    parser.add_argument("--deadline", type=float, default=300.0, help="the runs' deadline")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, object]]] = {"whole_runs": [], "zoo": []}

    print(f"profile {args.profile}, seed {args.seed}, deadline {args.deadline:g} s\n")
    if not args.only:
        print(f"{'target':<42} {'verdict':>8} {'wall s':>8} {'examples':>9} {'ended':>10}")
        for target in [*PASSING, *([] if args.skip_slow else [SLOW])]:
            started = time.monotonic()
            report = run(
                RunOptions(
                    target=target, profile=args.profile, seed=args.seed, deadline=args.deadline
                )
            )
            wall = time.monotonic() - started
            depth = report.depth
            results["whole_runs"].append(
                {"target": target, "verdict": report.verdict, "wall_s": wall, **depth}
            )
            print(
                f"{target:<42} {report.verdict:>8} {wall:>8.1f} {depth['examples']:>9} "
                f"{depth['ended']:>10}",
                flush=True,
            )
        print()

    print(
        f"{'zoo member':<28} {'property':<20} {'first failure s':>15} {'messages':>9} "
        f"{'calls':>6}  verified"
    )
    for member in ZOO:
        if member.outcome != "fail" or (args.only and args.only not in member.target):
            continue
        report = run(
            RunOptions(
                target=member.target, config=dict(member.config), profile=args.profile,
                seed=args.seed, timeout=3.0, max_rounds=1, deadline=args.deadline,
            )
        )  # fmt: skip
        for result in report.properties:
            if result.id not in member.expect:
                continue
            example = result.counterexample or {}
            row = {
                "target": member.target,
                "property": result.id,
                "status": result.status,
                "time_to_failure_s": result.time_to_failure_s,
                "messages": example.get("messages"),
                "calls": example.get("calls"),
                "verified": result.verified,
                "verification": result.verification,
            }
            results["zoo"].append(row)
            ttf = "-" if result.time_to_failure_s is None else f"{result.time_to_failure_s:.2f}"
            name = member.target.split(":")[-1]
            verified = "-" if result.status != "failed" else "yes" if result.verified else "no"
            print(
                f"{name:<28} {result.id:<20} {ttf:>15} {_dash(row['messages']):>9} "
                f"{_dash(row['calls']):>6}  {verified}",
                flush=True,
            )
    _summarize(results["zoo"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _summarize(rows: list[dict[str, object]]) -> None:
    found = [r for r in rows if r["time_to_failure_s"] is not None]
    if not found:
        return
    ttfs = [float(r["time_to_failure_s"]) for r in found]  # type: ignore[arg-type]
    sizes = [int(r["messages"]) for r in found]  # type: ignore[arg-type]
    verified = sum(bool(r["verified"]) for r in found)
    spread = collections.Counter(min(size, 7) for size in sizes)
    histogram = ", ".join(
        f"{'7+' if size == 7 else size}: {spread[size]}" for size in sorted(spread)
    )
    print(
        f"\ncaught {len(found)} of {len(rows)} in the first search; time to first failure "
        f"median {statistics.median(ttfs):.2f} s, max {max(ttfs):.2f} s\n"
        f"counterexample messages: median {statistics.median(sizes):g}, "
        f"<= 6 for {sum(s <= 6 for s in sizes)} of {len(sizes)} (by size: {histogram})\n"
        f"reproducers verified in a fresh process: {verified} of {len(found)}"
    )


if __name__ == "__main__":
    sys.exit(main())
