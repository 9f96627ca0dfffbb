"""The dashboard and alerts against a real Prometheus scraping a real fleet of ``ctxkit demo``
processes: 3 processes, 200 conversations, 7 of them constructed near their limit.

Parsing a query proves little: a panel can parse and still show "No data" because a name, a
label or a suffix is wrong. Here Prometheus scrapes the fleet every second with the
configuration the demo wrote, loads alerts.yml, and every panel query and every alert
expression must come back with data; the fleet's gauges must count each conversation once,
and the near-limit alert must fire for exactly the instance that holds them.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
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
from tests.ports import free_port, free_ports
from tests.promql import ALERTS, alert_rules, split_comparison
from tests.system import require_binary

JOB = "ctxkit-demo"
PROCESSES, CONVERSATIONS, NEAR_LIMIT = 3, 200, 7
DEMO = (
    "--duration", "120", "--rate", "10", "--seed", "1", "--budget", "12000",
    "--processes", str(PROCESSES), "--conversations", str(CONVERSATIONS),
    "--near-limit", str(NEAR_LIMIT),
)  # fmt: skip
"""Longer than the tests take (they stop it): 10 turns a second per process on budgets of
12k to 36k tokens compact within seconds. At 50 a process took half a core of a slow machine
for the whole module, and starved of the rest of a busy test run, the fleet's own start (every
conversation speaks once) outlasted the wait for it."""
WINDOW = "30s"
"""Rate and range windows: 30 scrapes at 1 s, so rates exist a few seconds after the start."""
DEADLINE = 60.0
"""Seconds a test waits for Prometheus to have what it asks for."""

T = TypeVar("T")


@dataclass
class Stack:
    """Where to reach the running fleet and Prometheus, and their logs."""

    instances: list[str]
    """host:port of each process, in order: process 0 holds the near-limit conversations."""
    prometheus_url: str
    logs: Path
    watch: str = ""
    """host:port of the `ctxkit watch` metrics the stack scrapes beside the fleet."""

    @property
    def metrics_urls(self) -> list[str]:
        return [f"http://{instance}/metrics" for instance in self.instances]

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
        text = error.read()
        try:
            return json.loads(text)
        except ValueError:  # not JSON: "Service Unavailable" while it is still starting
            raise OSError(f"HTTP {error.code} from {url}: {text[:200]!r}") from None


def _wait_for(what: str, attempt: Callable[[], T | None], stack: Stack | None = None) -> T:
    """Call ``attempt`` until it returns something, for at most ``DEADLINE`` seconds."""
    deadline = time.monotonic() + DEADLINE
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result, last = attempt(), None  # an error of an earlier attempt is stale now
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


class _WatchFeeder(threading.Thread):
    """Posts a few recorded conversations (OTLP/JSON, some with planted breakages) to a
    `ctxkit watch` every second while the stack runs, so that the dashboard's audit panels
    have rates to show."""

    def __init__(self, log: Path, watch: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.log, self.watch = log, watch
        self.stopping = threading.Event()

    def listening(self) -> str | None:
        if self.watch.poll() is not None:
            pytest.fail(f"ctxkit watch exited\n{self.log.read_text()}")
        found = re.search(r"receiving OTLP/HTTP on (http://\S+)", self.log.read_text())
        return found.group(1) if found else None

    def run(self) -> None:
        from tests.audit_fleet import fleet, otlp_lines

        url = _wait_for("ctxkit watch to listen", self.listening)
        round_number = 0
        while not self.stopping.wait(1.0 if round_number else 0):
            round_number += 1
            for line in otlp_lines(fleet(seed=1000 + round_number, size=4), batch=6, seed=1):
                request = urllib.request.Request(
                    f"{url}/v1/traces",
                    data=line.encode(),
                    headers={"content-type": "application/json"},
                )
                try:
                    urllib.request.urlopen(request, timeout=10).close()
                except OSError:
                    return  # the receiver stopped with the stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = require_binary("prometheus")
    require_binary("promtool")
    logs = tmp_path_factory.mktemp("prometheus-stack")
    first, web_port = free_ports(PROCESSES), free_port()
    running = Stack(
        instances=[f"127.0.0.1:{first + i}" for i in range(PROCESSES)],
        prometheus_url=f"http://127.0.0.1:{web_port}",
        logs=logs,
    )
    config = logs / "prometheus.yml"
    # The near-limit alert's "for: 1m", shortened so that it fires within the test.
    rules = logs / "alerts.yml"
    rules.write_text(ALERTS.read_text().replace("for: 1m", "for: 2s"))
    started: list[subprocess.Popen[bytes]] = []
    feeder: _WatchFeeder | None = None

    def alive(process: subprocess.Popen[bytes], name: str) -> None:
        """Fail at once, with its log, if a process died: waiting would not help."""
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}\n{running.diagnostics()}")

    try:
        demo = _start(
            [
                sys.executable, "-m", "ctxkit", "demo", *DEMO,
                "--metrics-port", str(first), "--prometheus-config", str(config),
            ],
            logs / "demo.log",
        )  # fmt: skip
        started.append(demo)

        def metrics_answer() -> bool | None:
            alive(demo, "ctxkit demo")
            for url in running.metrics_urls:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if b"ctxkit_views_total" not in response.read():
                        return None
            return True

        _wait_for("every process of the fleet to serve /metrics", metrics_answer, running)
        # A `ctxkit watch` fed recorded requests, so the dashboard's audit row has data.
        watch = _start(
            [
                sys.executable, "-m", "ctxkit", "watch", "--otlp-http", "127.0.0.1:0",
                "--metrics-port", "0", "--settle", "0.2",
            ],
            logs / "watch.log",
        )  # fmt: skip
        started.append(watch)

        def watch_metrics() -> str | None:
            alive(watch, "ctxkit watch")
            found = re.search(r"metrics on http://(\S+)/metrics", (logs / "watch.log").read_text())
            return found.group(1) if found else None

        # Its own free port, bound before Prometheus's is: no two picks can collide.
        running.watch = _wait_for("ctxkit watch to serve /metrics", watch_metrics, running)
        # The configuration the demo wrote, scraped every second, with the rules loaded.
        written = config.read_text()
        assert all(f'"{instance}"' in written for instance in running.instances), written
        written = written.replace(
            "scrape_configs:\n",
            "scrape_configs:\n  - job_name: ctxkit-watch\n    static_configs:\n"
            f'      - targets: ["{running.watch}"]\n',
        )
        config.write_text(
            written.replace("15s", "1s") + f"rule_files: [{json.dumps(str(rules))}]\n"
        )
        server = _start(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={logs / 'data'}",
                f"--web.listen-address=127.0.0.1:{web_port}",
                "--log.level=info",
            ],
            logs / "prometheus.log",
        )
        started.append(server)

        def scraped() -> bool:
            alive(server, "prometheus")
            total = running.query(f'sum(ctxkit_conversations{{job="{JOB}"}})')
            seen = float(total[0]["value"][1]) if total else 0.0
            up = {r["metric"]["instance"]: r["value"][1] for r in running.query("up")}
            assert seen == CONVERSATIONS, f"{seen:g} conversations of {CONVERSATIONS}; up: {up}"
            return True

        _wait_for("Prometheus to scrape the whole fleet", scraped, running)
        # Fed only once Prometheus listens: the feeder's client sockets take ephemeral ports,
        # one of which could otherwise be the port Prometheus was given.
        feeder = _WatchFeeder(logs / "watch.log", watch)
        feeder.start()
        yield running
    finally:
        if feeder is not None:
            feeder.stopping.set()
        for process in reversed(started):
            _stop(process)


def test_the_fleet_gauges_count_each_conversation_once(stack: Stack) -> None:
    """200 conversations over 3 processes, 7 built near their limit (all in process 0): the
    gauges say exactly that, whatever the others are doing."""
    (total,) = stack.query(f'sum(ctxkit_conversations{{job="{JOB}"}})')
    assert float(total["value"][1]) == CONVERSATIONS
    near = {
        series["metric"]["instance"]: float(series["value"][1])
        for series in stack.query(f'ctxkit_conversations_near_limit{{job="{JOB}"}}')
    }
    assert near == {stack.instances[0]: NEAR_LIMIT, **dict.fromkeys(stack.instances[1:], 0.0)}
    (highest,) = stack.query(f'max(ctxkit_context_utilization_max_ratio{{job="{JOB}"}})')
    assert 0.9 < float(highest["value"][1]) <= 1.0


def test_the_near_limit_alert_fires_for_the_instance_that_holds_them(stack: Stack) -> None:
    def firing() -> set[str] | None:
        alerts = stack.query('ALERTS{alertname="CtxkitContextNearLimit", alertstate="firing"}')
        return {series["metric"]["instance"] for series in alerts} or None

    assert _wait_for("CtxkitContextNearLimit to fire", firing, stack) == {stack.instances[0]}
    # Its value, the number of conversations near the limit there, is what its text says.
    lhs, _op, _number = split_comparison(alert_rules()["CtxkitContextNearLimit"])
    (value,) = stack.query(f'{lhs} and on (instance) ALERTS{{alertname="CtxkitContextNearLimit"}}')
    assert float(value["value"][1]) == NEAR_LIMIT


@pytest.mark.parametrize("process", range(PROCESSES))
def test_each_exporter_passes_promtool_lint(stack: Stack, process: int) -> None:
    with urllib.request.urlopen(stack.metrics_urls[process], timeout=10) as response:
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
        wanted = [JOB] if variable == "job" else stack.instances
        assert set(wanted) <= set(values), (variable, values)


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
        # The annotations name the job and instance: the aggregation must keep them. The
        # `ctxkit watch` of the stack exports the fleet figures too (of the requests it
        # audits), so the process alerts cover it as well.
        assert (series["metric"]["job"], series["metric"]["instance"]) in {
            *((JOB, instance) for instance in stack.instances),
            ("ctxkit-watch", stack.watch),
        }, series
        assert series["value"][1] in {"0", "1"}, series
