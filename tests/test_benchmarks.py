"""The benchmark must keep running: a tiny, untimed run of the real script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(
    script: str, *args: str, out: Path, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run ``benchmarks/<script>`` with ``args`` and ``--json out``; its output and results."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(out.read_text())


def test_agent_loop_benchmark_runs_and_reports_ratios(tmp_path: Path):
    sizes = ["--sizes", "120", "300", "--steps", "4", "--repeat", "1"]
    done, results = run_benchmark("agent_loop.py", *sizes, out=tmp_path / "results.json")
    assert "ctxkit reference" in done.stdout
    assert "naive re-encode" in done.stdout
    assert "flatness:" in done.stdout
    naive = [row for row in results["loop"] if row["manager"] == "naive re-encode"]
    assert len(naive) == 2
    assert all(row["steps"] >= 3 for row in results["loop"])
    assert len(results["bulk"]) == 2


def test_telemetry_overhead_benchmark_runs_every_mode(tmp_path: Path):
    small = ["--history", "200", "--steps", "6", "--rounds", "1"]
    done, results = run_benchmark("telemetry_overhead.py", *small, out=tmp_path / "overhead.json")
    modes = results["modes"]
    assert set(modes) == {"off", "off again", "prometheus", "stream", "otel", "all"}
    assert modes["off"]["overhead"]["latency"] == 0
    assert "goal: request overhead <= 5 %" in done.stdout


def test_inspect_ingest_benchmark_runs_both_streams(tmp_path: Path):
    small = ["--rate", "500", "--seconds", "1", "--backlog", "2000", "--turns", "20"]
    done, results = run_benchmark("inspect_ingest.py", *small, out=tmp_path / "ingest.json")
    streams = results["streams"]
    assert set(streams) == {"plain", "with listing"}
    for figures in streams.values():
        assert figures["sustained"]["taken"] == figures["sustained"]["written"] > 0
        assert figures["sustained"]["redraws_per_s"] <= 10.5
        assert figures["burst"]["events"] == 2000
    assert streams["with listing"]["bytes_per_line"] > streams["plain"]["bytes_per_line"]
    assert "redraws/s" in done.stdout


def test_persistence_benchmark_runs_every_mode(tmp_path: Path):
    out = tmp_path / "persistence.json"
    small = ["--adds", "60", "--rounds", "1", "--load-messages", "400", "--repeats", "1"]
    done, results = run_benchmark("persistence.py", *small, out=out, cwd=tmp_path)
    assert set(results["adds"]) == {
        "no file",
        "fsync=never",
        "fsync=always",
        "floor: write+fdatasync",
    }
    assert all(row["adds_per_s"] > 0 for row in results["adds"].values())
    assert results["load"]["messages"] > 300
    assert results["load"]["open_vs_plain_median_of_pairs"] > 0
    assert "2x goal" in done.stdout
    assert list(tmp_path.iterdir()) == [out]  # its files are gone


def test_conformance_benchmark_compares_the_schedules_and_finds_the_fault(tmp_path: Path):
    only = ["--profile", "quick", "--only", "SplitsPairsOpenAI", "--seeds", "1", "--twice"]
    done, results = run_benchmark("conformance_suite.py", *only, out=tmp_path / "suite.json")
    (row,) = results["schedules"]
    assert row["same"] is True
    assert row["before"]["verdict"] == row["after"]["verdict"] == "fail"
    assert "single/serial wall time: median" in done.stdout
    assert "equal for 1 of 1" in done.stdout
    (twice,) = results["twice"]
    assert twice == {"target": "pairs:SplitsPairsOpenAI", "verdict": "fail", "same": True,
                     "difference": ""}  # fmt: skip
    assert "the same report twice for 1 of 1 members" in done.stdout
    (found,) = results["fault_finding"]  # its seed-1 run is the first of the two
    assert found == {"target": "pairs:SplitsPairsOpenAI", "found": 1, "missed": []}
    assert "found 1 of 1 (member, property, seed) faults" in done.stdout
    assert "reproducers verified 1 of 1" in done.stdout


def test_protocol_overhead_benchmark_times_every_route(tmp_path: Path):
    done, results = run_benchmark(
        "protocol_overhead.py", "--messages", "20", "--repeat", "1", out=tmp_path / "r.json"
    )
    routes = [row["route"] for row in results["routes"]]
    assert routes[:2] == ["direct (no protocol)", "Python worker"]
    assert "vs Python worker" in done.stdout
    assert all(row["us_per_call"] > 0 for row in results["routes"])


def test_audit_benchmark_runs_and_reports_ratios(tmp_path: Path):
    args = ["--conversations", "5", "--requests", "6", "--repeat", "1"]
    done, results = run_benchmark("audit.py", *args, out=tmp_path / "audit.json")
    assert "audit file / decode JSON" in done.stdout
    assert {row["run"] for row in results["runs"]} == {
        "decode JSON",
        "audit file",
        "decode protobuf",
        "audit OTLP",
    }
    assert results["requests"] == 30
    assert results["state_bytes_per_conversation"] > 0
    assert set(results["peak_mib"]) == {"streamed", "read whole first"}
    assert all(one > 0 and two > 0 for one, two in results["peak_mib"].values())
