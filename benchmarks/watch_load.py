"""``ctxkit watch`` under steady load: does the audit keep up while traffic never pauses?

A real ``ctxkit watch`` process receives, over loopback OTLP/HTTP (protobuf), exports from
``--senders`` threads that post without pause (or at ``--rate`` requests a second) for
``--seconds``: a fleet of agent loops (benchmarks/audit.py's), 50 spans an export, cycled.
Every half second the receiver's ``ctxkit_audit_requests_total`` and resident memory are
sampled. Reported:

* the sustained rate: requests accepted (answered 200) and audited per second;
* at the end of the load, the share of accepted requests already audited, and the lag from
  arrival to audit (for each sample, how long ago the audited count was the accepted count);
* resident memory over the load: its peak, and the last sample against the one a third of the
  way in (flat means bounded by the settle time, not by the traffic);
* exports answered 503 (the queue full: the sender is told to retry) and that nothing accepted
  is lost (all audited once the load stops).

    python benchmarks/watch_load.py [--senders N] [--seconds S] [--settle S] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.audit import SPANS_PER_EXPORT, exports, protobuf  # noqa: E402


def _start_watch(settle: float, log: Path) -> tuple[subprocess.Popen[str], str, str]:
    out = log.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "watch", "--otlp-http", "127.0.0.1:0",
         "--metrics-port", "0", "--settle", str(settle)],
        stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text()
        otlp = re.search(r"receiving OTLP/HTTP on (http://\S+)", text)
        metrics = re.search(r"metrics on (http://\S+)", text)
        if otlp and metrics:
            return process, otlp.group(1), metrics.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"ctxkit watch did not start:\n{log.read_text()}")


def _audited(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^ctxkit_audit_requests_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


class Senders:
    """Threads posting exports without pause until told to stop; counts what was answered."""

    def __init__(self, url: str, bodies: list[bytes], count: int, rate: float = 0.0) -> None:
        self.url = f"{url}/v1/traces"
        self.interval = count * SPANS_PER_EXPORT / rate if rate else 0.0
        """Seconds between one sender's exports (0: no pause)."""
        self.bodies = bodies
        self.codes: dict[int, int] = {}
        self.accepted = 0
        """Requests (spans) in exports answered 200."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._send, args=(n,), daemon=True) for n in range(count)
        ]

    def _send(self, number: int) -> None:
        position = number
        due = time.monotonic()
        while not self._stop.is_set():
            if self.interval:
                due += self.interval
                time.sleep(max(0.0, due - time.monotonic()))
            body = self.bodies[position % len(self.bodies)]
            request = urllib.request.Request(
                self.url, data=body, headers={"content-type": "application/x-protobuf"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    code = response.status
            except urllib.error.HTTPError as exc:
                code = exc.code
            with self._lock:
                self.codes[code] = self.codes.get(code, 0) + 1
                if code == 200:
                    self.accepted += SPANS_PER_EXPORT
                    position += len(self.threads)
                elif code == 503:
                    time.sleep(0.05)  # what an exporter's retry does, briefly

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(60)


def run(senders: int, seconds: float, settle: float, rate: float = 0.0) -> dict[str, Any]:
    bodies = [protobuf(line) for line in exports(200, 40, 20)]
    with tempfile.TemporaryDirectory(prefix="ctxkit-load-") as scratch:
        return _loaded(bodies, senders, seconds, settle, rate, Path(scratch) / "watch.log")


def _loaded(
    bodies: list[bytes], senders: int, seconds: float, settle: float, rate: float, log: Path
) -> dict[str, Any]:
    process, url, metrics_url = _start_watch(settle, log)
    samples: list[tuple[float, int, float, float]] = []
    """(seconds since the load began, accepted, audited, resident MiB)"""
    try:
        load = Senders(url, bodies, senders, rate)
        began = time.monotonic()
        load.start()
        while (now := time.monotonic()) - began < seconds:
            samples.append(
                (now - began, load.accepted, _audited(metrics_url), _rss_mib(process.pid))
            )
            time.sleep(0.5)
        load.stop()
        ended = time.monotonic() - began
        at_end = (ended, load.accepted, _audited(metrics_url), _rss_mib(process.pid))
        samples.append(at_end)
        deadline = time.monotonic() + 120
        while _audited(metrics_url) < load.accepted and time.monotonic() < deadline:
            time.sleep(0.2)
        drained = time.monotonic() - began - ended
        audited = _audited(metrics_url)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    lags = []
    for when, _, done, _ in samples:
        reached = next((t for t, accepted, _, _ in samples if accepted >= done), when)
        lags.append(when - reached)
    third = samples[len(samples) // 3][3]
    return {
        "senders": senders,
        "rate": rate,
        "seconds": round(ended, 1),
        "settle_s": settle,
        "exports": dict(sorted(load.codes.items())),
        "accepted_requests": load.accepted,
        "audited_requests": int(audited),
        "accepted_per_s": round(load.accepted / ended),
        "audited_at_end_share": round(at_end[2] / load.accepted, 3) if load.accepted else 0.0,
        "lag_median_s": round(statistics.median(lags[len(lags) // 3 :]), 2),
        "lag_max_s": round(max(lags), 2),
        "drain_s": round(drained, 1),
        "rss_peak_mib": round(max(s[3] for s in samples), 1),
        "rss_third_mib": round(third, 1),
        "rss_end_mib": round(at_end[3], 1),
        "cpus": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--senders", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--settle", type=float, default=5.0, help="the watch's --settle")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests a second, all senders together (default 0: as fast as they can)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = run(args.senders, args.seconds, args.settle, args.rate)
    print(
        f"{result['senders']} senders for {result['seconds']} s, "
        f"{f'{args.rate:,.0f} requests/s' if args.rate else 'unpaced'}, --settle {args.settle}, "
        f"{result['cpus']} cores (the watch and the senders share them)"
    )
    print(f"exports answered: {result['exports']}")
    print(
        f"accepted {result['accepted_requests']:,} requests ({result['accepted_per_s']:,}/s); "
        f"audited by the end of the load: {result['audited_at_end_share']:.0%}; "
        f"all {result['audited_requests']:,} audited {result['drain_s']} s after it"
    )
    print(
        f"lag from arrival to audit: median {result['lag_median_s']} s, max {result['lag_max_s']} s"
    )
    print(
        f"resident memory: peak {result['rss_peak_mib']} MiB; a third in "
        f"{result['rss_third_mib']} MiB, at the end {result['rss_end_mib']} MiB "
        f"({result['rss_end_mib'] / result['rss_third_mib']:.2f}x)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
