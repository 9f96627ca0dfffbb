"""The benchmark must keep running: a tiny, untimed run of the real script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_agent_loop_benchmark_runs_and_reports_ratios(tmp_path: Path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "agent_loop.py"),
            "--sizes",
            "120",
            "300",
            "--steps",
            "4",
            "--repeat",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ctxkit reference" in done.stdout
    assert "naive re-encode" in done.stdout
    assert "flatness:" in done.stdout
    results = json.loads(out.read_text())
    naive = [row for row in results["loop"] if row["manager"] == "naive re-encode"]
    assert len(naive) == 2
    assert all(row["steps"] >= 3 for row in results["loop"])
    assert len(results["bulk"]) == 2


def test_telemetry_overhead_benchmark_runs_every_mode(tmp_path: Path):
    out = tmp_path / "overhead.json"
    script = str(ROOT / "benchmarks" / "telemetry_overhead.py")
    small = ["--history", "200", "--steps", "6", "--rounds", "1", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, script, *small],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    modes = json.loads(out.read_text())["modes"]
    assert set(modes) == {"off", "off again", "prometheus", "stream", "otel", "all"}
    assert modes["off"]["overhead"]["latency"] == 0
    assert "goal: request overhead <= 5 %" in done.stdout


def test_inspect_ingest_benchmark_runs_both_streams(tmp_path: Path):
    out = tmp_path / "ingest.json"
    script = str(ROOT / "benchmarks" / "inspect_ingest.py")
    small = ["--rate", "500", "--seconds", "1", "--backlog", "2000", "--turns", "20"]
    done = subprocess.run(
        [sys.executable, script, *small, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    streams = json.loads(out.read_text())["streams"]
    assert set(streams) == {"plain", "with listing"}
    for figures in streams.values():
        assert figures["sustained"]["taken"] == figures["sustained"]["written"] > 0
        assert figures["sustained"]["redraws_per_s"] <= 10.5
        assert figures["burst"]["events"] == 2000
    assert streams["with listing"]["bytes_per_line"] > streams["plain"]["bytes_per_line"]
    assert "redraws/s" in done.stdout


def test_persistence_benchmark_runs_every_mode(tmp_path: Path):
    out = tmp_path / "persistence.json"
    script = str(ROOT / "benchmarks" / "persistence.py")
    small = ["--adds", "60", "--rounds", "1", "--load-messages", "400", "--repeats", "1"]
    done = subprocess.run(
        [sys.executable, script, *small, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
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
