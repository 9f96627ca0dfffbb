"""``ctxkit watch`` under steady load, through benchmarks/watch_load.py (a real watch process,
loopback senders that never pause, a steady 400 requests a second in all, bounded in count
and time): the audit keeps up while the traffic flows, memory stays flat, every export is
answered and nothing accepted is lost. The benchmark measures how much more a watch takes
(about 1,000 a second with 90% audited as it flows, alone on a slow 2-core machine); a test
beside three others on two cores asks for what any watch must do, not for that machine's
margin (at 1,000 a second, a busy test run left half the requests to the end)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.long
def test_the_watch_keeps_up_with_traffic_that_never_pauses(tmp_path: Path):
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "watch_load.py"),
         "--senders", "4", "--seconds", "12", "--rate", "400", "--settle", "1",
         "--json", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    load = json.loads(out.read_text())
    assert set(load["exports"]) <= {"200", "503"}, load  # every export answered
    assert load["accepted_requests"] > 0
    assert load["audited_requests"] == load["accepted_requests"], load  # nothing lost
    # Audited while the traffic flows: a record waits about --settle after its own arrival,
    # not for the stream to go quiet (it never does here).
    assert load["audited_at_end_share"] >= 0.75, load
    assert load["lag_median_s"] < 4, load
    assert load["rss_end_mib"] <= 1.5 * load["rss_third_mib"], load  # flat after the start
