"""How fast the conformance suite decides, on this machine.

* wall time of a whole run with the default profile, per passing target (goal <= 60 s);
* for each broken manager of the zoo: time to its first failure (goal: median <= 10 s) and the
  counterexample's size after shrinking (goal <= 6 messages), first search only.

    python benchmarks/conformance_suite.py              # from the repository root
    python benchmarks/conformance_suite.py --profile quick --only SplitsPairsOpenAI
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["quick", "default", "thorough"])
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--only", help="run only zoo members whose target contains this")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, object]]] = {"passing": [], "zoo": []}

    print(f"profile {args.profile}, seed {args.seed}\n")
    if not args.only:
        print(f"{'target':<42} {'verdict':>8} {'wall s':>8}")
        for target in PASSING:
            started = time.monotonic()
            report = run(RunOptions(target=target, profile=args.profile, seed=args.seed))
            wall = time.monotonic() - started
            results["passing"].append({"target": target, "verdict": report.verdict, "wall_s": wall})
            print(f"{target:<42} {report.verdict:>8} {wall:>8.1f}", flush=True)
        print()

    print(f"{'zoo member':<42} {'property':<20} {'first failure s':>15} {'messages':>9}")
    for member in ZOO:
        if member.outcome != "fail" or (args.only and args.only not in member.target):
            continue
        report = run(
            RunOptions(
                target=member.target, profile=args.profile, seed=args.seed, timeout=3.0,
                max_rounds=1,
            )
        )  # fmt: skip
        for result in report.properties:
            if result.id not in member.expect:
                continue
            size = (result.counterexample or {}).get("messages")
            row = {
                "target": member.target,
                "property": result.id,
                "status": result.status,
                "time_to_failure_s": result.time_to_failure_s,
                "messages": size,
            }
            results["zoo"].append(row)
            ttf = "-" if result.time_to_failure_s is None else f"{result.time_to_failure_s:.2f}"
            name = member.target.split(":")[-1]
            print(f"{name:<42} {result.id:<20} {ttf:>15} {size if size is not None else '-':>9}",
                  flush=True)  # fmt: skip
    found = [r for r in results["zoo"] if r["time_to_failure_s"] is not None]
    if found:
        ttfs = [float(r["time_to_failure_s"]) for r in found]  # type: ignore[arg-type]
        sizes = [int(r["messages"]) for r in found]  # type: ignore[arg-type]
        print(
            f"\ncaught {len(found)} of {len(results['zoo'])} in the first search; time to first "
            f"failure median {statistics.median(ttfs):.2f} s, max {max(ttfs):.2f} s; "
            f"counterexample median {statistics.median(sizes):g} messages, "
            f"<= 6 for {sum(s <= 6 for s in sizes)} of {len(sizes)}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
