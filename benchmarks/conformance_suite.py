"""How long a default `ctxkit conformance` run takes to its verdict, before and after.

Every target is run as a user runs it (default options; each zoo member with its config and
format), one at a time, first with the ``serial`` schedule (the schedule before: each failure
ends a search, Hypothesis shrinks it and a new search looks for the rest, everything on one
worker), then with the default, ``single`` (one search that notes every failure and goes on;
ctxkit's minimizer makes each small; the cache loop and the verifications beside). Per target:
both wall times and their ratio, both verdicts and the required properties each failed, which
must be equal. Then the median and the slowest of each (goal: median <= 30 s, none over 60 s
on this project's 2-core machine). ``--before``/``--after`` compare other schedules.

With ``--seeds N``, the fault-finding rate: every failing member of the zoo under the
``--after`` schedule with N seeds, each of its expected properties found in each (goal: all),
with the counterexamples' median size, the share of reproducers verified in a fresh process
and the runs' median and slowest wall time.

    python benchmarks/conformance_suite.py                  # zoo + installed adapters, seed 1
    python benchmarks/conformance_suite.py --seeds 5 --skip-schedules   # fault finding only
    python benchmarks/conformance_suite.py --only keep_last,llama_index --json out.json
    python benchmarks/conformance_suite.py --across-seeds 5 --skip-schedules  # issue 45's times
    python benchmarks/conformance_suite.py --across-seeds 5 --against 48a507e^ --skip-schedules
    python benchmarks/conformance_suite.py --twice --seeds 6 --skip-schedules

``--across-seeds`` runs the command line as a user does (a process per run, the default seed
fixed); with ``--against REV`` each run is made by that commit's code too, one after the
other, so before and after are measured in one run on one machine. ``--twice`` runs every
zoo member twice on the default seed, each in a process of its own, and compares the JSON
reports but for times: the same command on the same code must give the same report.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# litellm fetches its model price map from the network when imported (12 s of retries here):
# its own switch reads the copy it ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ctxkit.adapters import ADAPTERS, installed_version  # noqa: E402
from ctxkit.conformance.reports.results import without_times  # noqa: E402
from ctxkit.conformance.runner import RunOptions, SetupError, run  # noqa: E402
from ctxkit.conformance.schedule import DEFAULT, SCHEDULES  # noqa: E402
from tests.zoo import ZOO, Member  # noqa: E402

REQUIRED = {"tool_pair_integrity", "ordering", "non_destructive", "lifecycle"}


def targets(only: str | None) -> list[tuple[str, dict[str, Any]]]:
    """(name, RunOptions keywords) of the reference manager, every zoo member that loads and
    every installed adapter; with ``only``, those whose name holds one of its comma-separated
    words."""
    found: list[tuple[str, dict[str, Any]]] = [
        ("ctxkit.reference:mount", {"target": "ctxkit.reference:mount"})
    ]
    for member in ZOO:
        if member.outcome == "load_error":
            continue
        found.append((_name(member), _options(member)))
    for adapter in ADAPTERS:
        if installed_version(adapter):
            found.append((adapter.name, {"target": adapter.name}))
    return [(name, kw) for name, kw in found if _chosen(name, only)]


def _chosen(name: str, only: str | None) -> bool:
    return not only or any(word and word in name for word in only.split(","))


def _name(member: Member) -> str:
    name = member.target.removeprefix("tests.zoo.")
    return name if member.format is None else f"{name}[{member.format}]"


def _options(member: Member) -> dict[str, Any]:
    options: dict[str, Any] = {"target": member.target, "config": dict(member.config)}
    if member.format is not None:
        options["shapes"] = tuple(member.format.split(","))
    return options


def one_run(options: dict[str, Any], schedule: str, seed: int, profile: str) -> dict[str, Any]:
    started = time.monotonic()
    try:
        report = run(RunOptions(**options, schedule=schedule, seed=seed, profile=profile))
    except SetupError as exc:
        return {"verdict": "setup error", "wall_s": time.monotonic() - started, "why": str(exc)}
    return _result(report.to_json(), time.monotonic() - started)


def _result(report: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """What this benchmark keeps of a JSON report."""
    properties = report["properties"]
    return {
        "verdict": report["verdict"],
        "wall_s": wall_s,
        "failed": sorted(p["id"] for p in properties if p["status"] == "failed"),
        "errors": sorted(p["id"] for p in properties if p["status"] == "error"),
        "phases": report.get("phases"),
        "examples": report["depth"].get("examples"),
        "per_search": report["depth"].get("examples_per_search"),
        "properties": {
            p["id"]: {
                "status": p["status"],
                "messages": (p["counterexample"] or {}).get("messages"),
                "verified": p["verified"],
            }
            for p in properties
        },
    }


class Tree:
    """A checkout whose ``ctxkit conformance`` a run uses: this one, or a commit's files
    (``git archive``) in a temporary folder, its flags spelled as that commit spells them."""

    def __init__(self, rev: str | None = None) -> None:
        self.rev = rev or "this tree"
        self.folder: tempfile.TemporaryDirectory | None = None
        self.root = ROOT
        if rev is not None:
            archive = subprocess.run(
                ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
            ).stdout
            self.folder = tempfile.TemporaryDirectory(prefix="ctxkit-before-")
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(self.folder.name, filter="data")
            self.root = Path(self.folder.name)
        cli = (self.root / "ctxkit/cli/conformance.py").read_text()
        self.shapes_flag = "--shapes" if '"--shapes"' in cli else "--format"

    def run(
        self, options: dict[str, Any], seed: int | None, profile: str = "default"
    ) -> dict[str, Any]:
        """One ``ctxkit conformance`` process as a user starts it (``seed`` None: the
        default); its result, and the JSON report under ``report``."""
        argv = [sys.executable, "-m", "ctxkit", "conformance", options["target"]]
        if profile != "default":
            argv += ["--profile", profile]
        if options.get("config"):
            argv += ["--config", json.dumps(options["config"])]
        if options.get("shapes"):
            argv += [self.shapes_flag, ",".join(options["shapes"])]
        if seed is not None:
            argv += ["--seed", str(seed)]
        with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as folder:
            path = Path(folder) / "report.json"
            env = dict(os.environ, PYTHONPATH=str(self.root))
            started = time.monotonic()
            done = subprocess.run(
                [*argv, "--report-json", str(path)], cwd=self.root, env=env,
                capture_output=True, text=True,
            )  # fmt: skip
            wall = time.monotonic() - started
            if not path.exists():
                why = (done.stderr.strip().splitlines() or ["no output"])[-1]
                return {"verdict": "setup error", "wall_s": wall, "why": why, "report": None}
            report = json.loads(path.read_text())
        return {**_result(report, wall), "report": report}

    def close(self) -> None:
        if self.folder is not None:
            self.folder.cleanup()


def compare_schedules(
    chosen: list[tuple[str, dict[str, Any]]], seed: int, profile: str, pair: tuple[str, str]
) -> list[dict]:
    before, after = pair
    print(f"{before} (before) and {after} (after), seed {seed}, profile {profile}\n")
    print(
        f"{'target':<46} {before + ' s':>9} {after + ' s':>9} {'ratio':>6}  "
        f"{'verdicts':<11} {'same':>4}  failed (required)"
    )
    rows = []
    for name, options in chosen:
        old = one_run(options, before, seed, profile)
        new = one_run(options, after, seed, profile)
        same = old["verdict"] == new["verdict"] and _required(old) == _required(new)
        rows.append({"target": name, "before": old, "after": new, "same": same})
        verdicts = f"{old['verdict']}/{new['verdict']}"
        failed = ",".join(_required(new)) or "-"
        if _required(old) != _required(new):
            failed = f"{before} {','.join(_required(old)) or '-'}; {after} {failed}"
        print(
            f"{name[:46]:<46} {old['wall_s']:>9.1f} {new['wall_s']:>9.1f} "
            f"{new['wall_s'] / old['wall_s']:>6.2f}  {verdicts:<11} "
            f"{'yes' if same else 'NO':>4}  {failed}",
            flush=True,
        )
    for key, schedule in (("before", before), ("after", after)):
        walls = [row[key]["wall_s"] for row in rows]
        slowest = max(rows, key=lambda row: row[key]["wall_s"])
        print(
            f"\n{schedule}: median {statistics.median(walls):.1f} s, slowest "
            f"{slowest[key]['wall_s']:.1f} s ({slowest['target']}), over 60 s: "
            f"{sum(w > 60 for w in walls)}, total {sum(walls) / 60:.1f} min",
            end="",
        )
    ratios = [row["after"]["wall_s"] / row["before"]["wall_s"] for row in rows]
    print(
        f"\n{after}/{before} wall time: median {statistics.median(ratios):.2f}; "
        f"verdicts and required failures equal for {sum(r['same'] for r in rows)} of "
        f"{len(rows)}"
    )
    return rows


ACROSS_SEEDS = [
    ("quick start: the reference manager", {"target": "ctxkit.reference:mount"}),
    ("langchain:trim_messages start_on null", {
        "target": "langchain:trim_messages", "config": {"start_on": None},
    }),
    ("litellm trim_messages", {"target": "litellm.utils:trim_messages"}),
    ("litellm trim_messages max_tokens 2000", {
        "target": "litellm.utils:trim_messages", "config": {"max_tokens": 2000},
    }),
]  # fmt: skip
"""The targets issue 45 times across seeds, beside the zoo: litellm's trim_messages as a user
first runs it (it trims only with a max_tokens: inconclusive), and with one, where it compacts
and counts every message of every view."""


def across_seeds(
    chosen: list[tuple[str, dict[str, Any]]], seeds: list[int], against: str | None
) -> list[dict]:
    """Wall time of each target on each seed, run as a user runs it (a process per run); with
    ``against``, that commit's run of each target and seed just before this tree's. Per
    target its median and slowest, then the median and slowest of every run."""
    trees = [Tree(against), Tree()] if against else [Tree()]
    print(f"\nwall time across seeds {', '.join(map(str, seeds))}, the command line\n")
    print(f"{'target':<40} " + "  ".join(f"{t.rev[:9]:>9} median slowest  verdicts" for t in trees))
    rows: list[dict] = []
    walls: dict[str, list[float]] = {t.rev: [] for t in trees}
    try:
        for name, options in chosen:
            row: dict[str, Any] = {"target": name}
            cells = []
            for tree in trees:
                results = [tree.run(options, seed) for seed in seeds]
                times = [r["wall_s"] for r in results]
                walls[tree.rev] += times
                verdicts = "/".join(sorted({r["verdict"] for r in results}))
                row[tree.rev] = {"walls": times, "verdicts": verdicts}
                cells.append(f"{statistics.median(times):>16.1f} {max(times):>7.1f}  {verdicts:<8}")
            rows.append(row)
            print(f"{name[:40]:<40} " + "  ".join(cells), flush=True)
    finally:
        for tree in trees:
            tree.close()
    for rev, times in walls.items():
        print(
            f"\n{rev}: all {len(times)} runs: median {statistics.median(times):.1f} s, slowest "
            f"{max(times):.1f} s, over 60 s: {sum(w > 60 for w in times)}",
            end="",
        )
    print()
    return rows


def twice(members: list[Member], profile: str) -> tuple[list[dict], dict[tuple[str, int], dict]]:
    """Every member run twice on the default seed, each in a process of its own: are the
    JSON reports equal but for times? Returns the rows, and the first runs by (member, 1)
    for the fault finding to reuse."""
    tree = Tree()
    print("\nthe same command twice (default seed, a process each)\n")
    print(f"{'zoo member':<46} {'verdict':<12} {'same':>4}  first difference")
    rows, first_runs = [], {}
    for member in members:
        first, second = (tree.run(_options(member), None, profile) for _ in range(2))
        difference = _first_difference(
            without_times(first.pop("report")), without_times(second.pop("report"))
        )
        first_runs[(_name(member), 1)] = first
        rows.append({"target": _name(member), "verdict": first["verdict"], "same": not difference,
                     "difference": difference})  # fmt: skip
        print(
            f"{_name(member)[:46]:<46} {first['verdict']:<12} "
            f"{'yes' if not difference else 'NO':>4}  {difference}",
            flush=True,
        )
    print(f"\nthe same report twice for {sum(r['same'] for r in rows)} of {len(rows)} members")
    return rows, first_runs


def _first_difference(first: Any, second: Any, where: str = "") -> str:
    """Where two JSON values first differ ('' if nowhere)."""
    if type(first) is not type(second):
        return where or "the report"
    if isinstance(first, dict):
        for key in sorted(set(first) | set(second), key=str):
            if key not in first or key not in second:
                return f"{where}.{key}"
            found = _first_difference(first[key], second[key], f"{where}.{key}")
            if found:
                return found
        return ""
    if isinstance(first, list):
        if len(first) != len(second):
            return f"{where} (length)"
        for k, (a, b) in enumerate(zip(first, second, strict=True)):
            found = _first_difference(a, b, f"{where}[{k}]")
            if found:
                return found
        return ""
    return "" if first == second else where


def _required(result: dict[str, Any]) -> list[str]:
    return [p for p in result.get("failed", []) if p in REQUIRED]


def fault_finding(
    only: str | None,
    seeds: list[int],
    profile: str,
    schedule: str,
    known: dict[tuple[str, int], dict] | None = None,
) -> list[dict]:
    """``known``: runs already made, by (member, seed), taken instead of running again."""
    members = [m for m in ZOO if m.outcome == "fail" and _chosen(_name(m), only)]
    print(f"\nfault finding, {schedule} schedule, seeds {', '.join(map(str, seeds))}\n")
    print(f"{'zoo member':<46} {'found':>7}  missed")
    rows, sizes, verified, faults, walls = [], [], 0, 0, []
    for member in members:
        found, missed = 0, []
        for seed in seeds:
            result = (known or {}).get((_name(member), seed)) or one_run(
                _options(member), schedule, seed, profile
            )
            walls.append(result["wall_s"])
            for property_id in sorted(member.expect):
                entry = result.get("properties", {}).get(property_id, {})
                faults += 1
                if entry.get("status") == "failed":
                    found += 1
                    verified += bool(entry.get("verified"))
                    if entry.get("messages") is not None:
                        sizes.append(entry["messages"])
                else:
                    missed.append(f"{property_id}@{seed}")
        rows.append({"target": _name(member), "found": found, "missed": missed})
        expected = len(member.expect) * len(seeds)
        print(f"{_name(member)[:46]:<46} {found:>3}/{expected:<3}  {' '.join(missed)}", flush=True)
    hits = sum(row["found"] for row in rows)
    if faults:
        print(
            f"\nfound {hits} of {faults} (member, property, seed) faults; counterexample "
            f"messages median {statistics.median(sizes) if sizes else 0:g}; reproducers "
            f"verified {verified} of {hits}; run median {statistics.median(walls):.1f} s, "
            f"slowest {max(walls):.1f} s"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the seed of the comparison (1)")
    parser.add_argument(
        "--seeds", type=int, default=0, metavar="N", help="fault finding with seeds 1..N"
    )
    parser.add_argument(
        "--seeds-from", type=int, default=1, metavar="K", help="with --seeds: seeds K..N (1)"
    )
    parser.add_argument(
        "--only", help="only targets whose name holds one of these comma-separated words"
    )
    parser.add_argument(
        "--skip-schedules", action="store_true", help="leave out the side-by-side comparison"
    )
    parser.add_argument("--profile", default="default", choices=["quick", "default", "thorough"])
    for option, default in (("--before", "serial"), ("--after", DEFAULT)):
        parser.add_argument(
            option, default=default, choices=sorted(SCHEDULES), help=f"a schedule ({default})"
        )
    parser.add_argument(
        "--across-seeds",
        type=int,
        default=0,
        metavar="N",
        help="wall time of the quick start, LangChain's and litellm's trimmers and the zoo "
        "(or --only's) on seeds 1..N",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="with --across-seeds: also run each target and seed with this commit's code "
        "(before and after in one run)",
    )
    parser.add_argument(
        "--twice",
        action="store_true",
        help="run every zoo member (or --only's) twice on the default seed and compare the "
        "reports but for times",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    if not args.skip_schedules:
        results["schedules"] = compare_schedules(
            targets(args.only), args.seed, args.profile, (args.before, args.after)
        )
    if args.across_seeds:
        chosen = [(n, o) for n, o in ACROSS_SEEDS if _chosen(n, args.only)]
        chosen += [(_name(m), _options(m)) for m in ZOO if m.outcome != "load_error"]
        chosen = [(n, o) for n, o in chosen if _chosen(n, args.only)]
        seeds = list(range(1, args.across_seeds + 1))
        results["across_seeds"] = across_seeds(chosen, seeds, args.against)
    known: dict[tuple[str, int], dict] = {}
    if args.twice:
        members = [m for m in ZOO if m.outcome != "load_error" and _chosen(_name(m), args.only)]
        results["twice"], known = twice(members, args.profile)
        if args.after != DEFAULT:
            known = {}  # the default run is not the one the fault finding asks for
    if args.seeds:
        seeds = list(range(args.seeds_from, args.seeds + 1))
        results["fault_finding"] = fault_finding(args.only, seeds, args.profile, args.after, known)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
