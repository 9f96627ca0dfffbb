"""The dashboard and alerts against a real Prometheus scraping a real ``ctxkit demo``.

Parsing a query proves little: a panel can parse and still show "No data" because a name, a
label or a suffix is wrong. Here Prometheus scrapes the demo every second, loads alerts.yml,
and every panel query and every alert expression must come back with data.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dashboards import build
from tests.promql import ALERTS, alert_rules, split_comparison
from tests.system import require_binary

JOB = "ctxkit-demo"
DEMO = ("--duration", "90", "--rate", "20", "--seed", "1")
"""Longer than the tests take (they stop it): 20 turns a second on a small budget compact often."""
WINDOW = "30s"
"""Rate and range windows: 30 scrapes at 1 s, so rates exist a few seconds after the start."""
DEADLINE = 60.0
"""Seconds a test waits for Prometheus to have what it asks for."""

T = TypeVar("T")


@dataclass
class Stack:
    """Where to reach the running demo and Prometheus, and their logs."""

    metrics_url: str
    prometheus_url: str
    logs: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result; fails the test on an error status."""
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = _get(url)
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def api(self, path: str) -> Any:
        body = _get(self.prometheus_url + path)
        assert body["status"] == "success", (path, body)
        return body["data"]

    def diagnostics(self) -> str:
        """The processes' own words, for a failure message."""
        parts = []
        for log in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:  # Prometheus explains a bad query in the body
        return json.load(error)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(what: str, attempt: Callable[[], T | None], stack: Stack | None = None) -> T:
    """Call ``attempt`` until it returns something, for at most ``DEADLINE`` seconds."""
    deadline = time.monotonic() + DEADLINE
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = attempt()
        except (OSError, AssertionError, KeyError) as error:
            result, last = None, error
        if result is not None:
            return result
        time.sleep(0.5)
    words = stack.diagnostics() if stack else ""
    pytest.fail(f"gave up after {DEADLINE:.0f} s waiting for {what} (last: {last!r})\n{words}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a process writing its output to ``log`` (the child keeps its own handle)."""
    with log.open("wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = require_binary("prometheus")
    require_binary("promtool")
    logs = tmp_path_factory.mktemp("prometheus-stack")
    metrics_port, web_port = _free_port(), _free_port()
    running = Stack(
        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
        prometheus_url=f"http://127.0.0.1:{web_port}",
        logs=logs,
    )
    config = logs / "prometheus.yml"
    # JSON is YAML. Intervals of 1 s so that rates and alerts have data within seconds.
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(ALERTS)],
                "scrape_configs": [
                    {
                        "job_name": JOB,
                        "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                    }
                ],
            },
            indent=2,
        )
    )
    started: list[subprocess.Popen[bytes]] = []

    def alive(process: subprocess.Popen[bytes], name: str) -> None:
        """Fail at once, with its log, if a process died: waiting would not help."""
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}\n{running.diagnostics()}")

    try:
        demo = _start(
            [sys.executable, "-m", "ctxkit", "demo", "--metrics-port", str(metrics_port), *DEMO],
            logs / "demo.log",
        )
        started.append(demo)

        def metrics_answer() -> bool | None:
            alive(demo, "ctxkit demo")
            with urllib.request.urlopen(running.metrics_url, timeout=5) as response:
                return b"ctxkit_views_total" in response.read() or None

        _wait_for("ctxkit demo to serve /metrics", metrics_answer, running)
        server = _start(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={logs / 'data'}",
                f"--web.listen-address=127.0.0.1:{web_port}",
                "--log.level=warn",
            ],
            logs / "prometheus.log",
        )
        started.append(server)

        def scraped() -> bool | None:
            alive(server, "prometheus")
            return bool(running.query(f'ctxkit_views_total{{job="{JOB}"}} > 0')) or None

        _wait_for("Prometheus to scrape the demo", scraped, running)
        yield running
    finally:
        for process in reversed(started):
            _stop(process)


def test_demo_metrics_pass_promtool_lint(stack: Stack) -> None:
    with urllib.request.urlopen(stack.metrics_url, timeout=10) as response:
        exposition = response.read()
    result = subprocess.run(
        [require_binary("promtool"), "check", "metrics"],
        input=exposition,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


def test_prometheus_loaded_the_alert_rules_healthy(stack: Stack) -> None:
    expected = set(alert_rules())

    def evaluated() -> dict[str, dict[str, Any]] | None:
        groups = stack.api("/api/v1/rules")["groups"]
        rules = {r["name"]: r for g in groups if g["name"] == "ctxkit" for r in g["rules"]}
        errors = {n: r.get("lastError") for n, r in rules.items() if r["health"] == "err"}
        assert not errors, errors
        done = set(rules) == expected and all(r["health"] == "ok" for r in rules.values())
        return rules if done else None

    rules = _wait_for("the ctxkit rule group to be evaluated", evaluated, stack)
    assert {r["type"] for r in rules.values()} == {"alerting"}


def test_job_and_instance_variables_find_the_demo(stack: Stack) -> None:
    """What Grafana's label_values() asks: the job and instance label values of the series."""
    for variable in ("job", "instance"):
        (definition,) = [
            v["definition"] for v in build.build()["templating"]["list"] if v["name"] == variable
        ]
        selector = build.for_prometheus(definition.removeprefix("label_values(").split(", ")[0])
        query = urllib.parse.urlencode({"match[]": selector})
        values = stack.api(f"/api/v1/label/{variable}/values?{query}")
        wanted = JOB if variable == "job" else stack.metrics_url.split("/")[2]
        assert wanted in values, (variable, values)


QUERIES = build.queries(build.build())


@pytest.mark.parametrize(("title", "ref", "expr"), QUERIES, ids=[f"{t}-{r}" for t, r, _ in QUERIES])
def test_panel_query_returns_data(stack: Stack, title: str, ref: str, expr: str) -> None:
    promql = build.for_prometheus(expr, window=WINDOW)

    def answered() -> list[dict[str, Any]] | None:
        result = stack.query(promql)
        finite = [s for s in result if math.isfinite(float(s["value"][1]))]
        return result if finite else None

    result = _wait_for(f"{title} {ref} to return a number: {promql}", answered, stack)
    # Every series of a panel belongs to the demo: the job filter works, nothing else leaks in.
    for series in result:
        assert series["metric"].get("job", JOB) == JOB, series


@pytest.mark.parametrize("name", sorted(alert_rules()))
def test_alert_expression_evaluates(stack: Stack, name: str) -> None:
    lhs, op, number = split_comparison(alert_rules()[name])
    promql = f"{lhs} {op} bool {number}"

    def answered() -> list[dict[str, Any]] | None:
        return stack.query(promql) or None

    result = _wait_for(f"alert {name} to evaluate: {promql}", answered, stack)
    for series in result:
        # The annotations name the job and instance: the aggregation must keep them.
        assert series["metric"]["job"] == JOB, series
        assert series["metric"]["instance"] == stack.metrics_url.split("/")[2], series
        assert series["value"][1] in {"0", "1"}, series
