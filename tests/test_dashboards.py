"""The Grafana dashboard, alert rules and scrape config, checked without a running server: the
committed JSON is what build.py makes, it imports as is, every query names only declared
metrics and filters by the variables, and Prometheus's own parser (promtool) accepts every
panel query, rule and the config. The live check is in test_prometheus_server.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ctxkit.telemetry.names import METRICS, RETIRED
from dashboards import build
from tests.promql import (
    ALERTS,
    DASHBOARDS,
    alert_rules,
    exposed_names,
    metric_names,
    split_comparison,
)
from tests.system import require_binary

DASHBOARD = build.build()
QUERIES = build.queries(DASHBOARD)
PANELS = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
VARIABLES = {v["name"]: v for v in DASHBOARD["templating"]["list"]}


def _promtool(*args: str, cwd: Path = DASHBOARDS) -> subprocess.CompletedProcess[str]:
    promtool = require_binary("promtool")
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def _variable_selector(variable: dict[str, Any]) -> str:
    """The series selector inside ``label_values(<selector>, <label>)``."""
    match = re.fullmatch(r"label_values\((.+), *(\w+)\)", variable["query"]["query"])
    assert match, variable["query"]
    assert match[2] == variable["name"]
    return match[1]


# -- the committed file -------------------------------------------------------------------------


def test_committed_dashboard_is_what_build_makes() -> None:
    assert build.OUTPUT.read_text(encoding="utf-8") == build.render(DASHBOARD), (
        "dashboards/ctxkit-context.json is stale: run python dashboards/build.py"
    )
    assert build.main(["--check"]) == 0


def test_check_fails_on_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "ctxkit-context.json"
    stale.write_text(build.render(DASHBOARD).replace("ctxkit_views_total", "ctxkit_views"))
    monkeypatch.setattr(build, "OUTPUT", stale)
    assert build.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert build.main([]) == 0
    assert stale.read_text(encoding="utf-8") == build.render(DASHBOARD)


def test_render_is_sorted_and_ends_with_a_newline() -> None:
    text = build.render(DASHBOARD)
    assert text.endswith("}\n")
    assert json.loads(text) == DASHBOARD
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- importable as is -------------------------------------------------------------------------


def test_dashboard_declares_its_datasource_input_and_a_stable_uid() -> None:
    (source,) = DASHBOARD["__inputs"]
    assert source == source | {
        "name": "DS_PROMETHEUS",
        "type": "datasource",
        "pluginId": "prometheus",
    }
    required = {(r["type"], r["id"]) for r in DASHBOARD["__requires"]}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} <= required
    assert {("panel", p["type"]) for p in PANELS} <= required
    assert DASHBOARD["uid"] == "ctxkit-context"
    assert DASHBOARD["id"] is None
    assert DASHBOARD["schemaVersion"] == 39


def test_variables_choose_datasource_job_and_instance() -> None:
    assert list(VARIABLES) == ["datasource", "job", "instance"]
    source = VARIABLES["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    assert source["current"]["value"] == "${DS_PROMETHEUS}"
    for name in ("job", "instance"):
        variable = VARIABLES[name]
        assert variable["type"] == "query"
        assert variable["multi"]
        assert variable["includeAll"]
        assert variable["allValue"] == ".*"
        assert variable["datasource"] == build.DATASOURCE
        assert variable["definition"] == variable["query"]["query"]
        assert metric_names(_variable_selector(variable)) <= exposed_names()
    # The instance list follows the chosen jobs.
    assert '"$job"' in _variable_selector(VARIABLES["instance"])


def test_every_panel_uses_the_datasource_variable_and_explains_itself() -> None:
    for panel in PANELS:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])
        assert len(panel["description"]) > 40, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs), panel["title"]


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(set(ids)) == len(ids)
    taken: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        box = panel["gridPos"]
        assert box["x"] >= 0, panel["title"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        cells = {(box["x"] + dx, box["y"] + dy) for dx in range(box["w"]) for dy in range(box["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_the_panels_the_issues_ask_for_are_there() -> None:
    exprs = "\n".join(expr for _title, _ref, expr in QUERIES)
    for needed in (
        "sum(ctxkit_conversations{",
        "sum(ctxkit_conversations_near_limit{",
        "sum(ctxkit_conversations_over_threshold{",
        "max(ctxkit_context_utilization_max_ratio{",
        "max by (instance) (ctxkit_context_utilization_max_ratio{",
        "sum by (le) (increase(ctxkit_view_utilization_ratio_bucket{",
        "sum(rate(ctxkit_view_prefix_kept_tokens_total{",
        "sum(rate(ctxkit_view_tokens_total{",
        "histogram_quantile(0.95, sum by (le) (rate(ctxkit_view_size_tokens_bucket{",
        "60 * sum by (strategy) (rate(ctxkit_compactions_total{",
        "ctxkit_compaction_tokens_saved_total{",
        "histogram_quantile(0.99, sum by (le) (rate(ctxkit_compaction_duration_seconds_bucket{",
        'ctxkit_compaction_units_total{action="truncated", ',
        "sum by (action) (rate(ctxkit_compaction_units_total{",
        "sum by (property) (increase(ctxkit_invariant_violations_total{",
        "ctxkit_view_duration_seconds_bucket{",
        "ctxkit_history_tokens{",
        "60 * sum by (gen_ai_token_type) (rate(gen_ai_client_token_usage_sum{",
        "histogram_quantile(0.5, sum by (le) (rate(ctxkit_usage_estimate_ratio_bucket{",
        "count by (version, python_version) (ctxkit_build_info{",
    ):
        assert needed in exprs, needed
    # The fleet: utilization as a heatmap over the views, and a per-instance drill-down.
    (heatmap,) = [p for p in PANELS if p["type"] == "heatmap"]
    assert heatmap["targets"][0]["format"] == "heatmap"
    (by_instance,) = [p for p in PANELS if p["title"] == "Highest utilization by instance"]
    defaults = by_instance["fieldConfig"]["defaults"]
    assert defaults["custom"]["thresholdsStyle"]["mode"] == "line"
    assert {"color": "red", "value": 0.9} in defaults["thresholds"]["steps"]
    # No panel reads a retired gauge.
    for retired in RETIRED:
        assert f"{retired.split(' ')[0]}{{" not in exprs


# -- the queries ------------------------------------------------------------------------------


@pytest.mark.parametrize(("title", "ref", "expr"), QUERIES, ids=[f"{t}-{r}" for t, r, _ in QUERIES])
def test_panel_query_uses_declared_metrics_filtered_by_the_variables(
    title: str, ref: str, expr: str
) -> None:
    names = metric_names(expr)
    assert names, f"{title} {ref} selects no metric: {expr}"
    assert names <= exposed_names(), f"undeclared metrics {names - exposed_names()} in {expr}"
    for name in names:
        for match in re.finditer(rf"(?<![\w:]){name}(\{{[^}}]*\}})?", expr):
            assert build.SELECTOR in (match[1] or ""), f"{name} unfiltered in {expr}"


def test_every_declared_metric_has_a_panel() -> None:
    """A metric nobody charts is a metric nobody sees: a new one needs a panel."""
    used = set().union(*(metric_names(expr) for _t, _r, expr in QUERIES))
    for declared in METRICS:
        series = {declared.exposed + s for s in ("", "_bucket", "_sum", "_count")}
        assert used & series, f"no panel shows {declared.exposed}"


def test_metric_names_finds_names_and_only_names() -> None:
    """The check above is only as good as this reader of PromQL."""
    expr = (
        'histogram_quantile(0.95, sum by (le, job) (rate(a_bucket{le="1.0", job=~"x|y"}[5m])))'
        " / on (job) group_left (instance) b offset 1m > bool 1e+06 and ignoring(x) c:rec"
    )
    assert metric_names(expr) == {"a_bucket", "b", "c:rec"}
    assert metric_names("sum(increase(ctxkit_compactionz_total[1m]))") == {
        "ctxkit_compactionz_total"
    }


def test_for_prometheus_replaces_every_variable_or_refuses() -> None:
    (compactions,) = [q for title, _r, q in QUERIES if title == "Compactions in range"]
    expr = build.for_prometheus(compactions, window="30s")
    assert expr == 'sum(increase(ctxkit_compactions_total{job=~".*", instance=~".*"}[30s]))'
    with pytest.raises(ValueError, match="unknown Grafana variable"):
        build.for_prometheus("rate(x[$__interval])")


def test_panel_queries_parse_in_prometheus(tmp_path: Path) -> None:
    """One recording rule per panel query (and variable selector): promtool parses each."""
    exprs = [build.for_prometheus(expr) for _t, _r, expr in QUERIES]
    exprs += [build.for_prometheus(_variable_selector(VARIABLES[n])) for n in ("job", "instance")]
    rules = [{"record": f"ctxkit_dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "panels.rules.yml"
    # JSON is YAML: no YAML writer needed.
    path.write_text(json.dumps({"groups": [{"name": "panels", "rules": rules}]}, indent=2))
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_panel_query_errors_are_caught(tmp_path: Path) -> None:
    """The check above would fail on a broken query: promtool is no rubber stamp."""
    path = tmp_path / "broken.rules.yml"
    broken = {"record": "x:y", "expr": "sum by (le) (rate(x[1m])"}
    path.write_text(json.dumps({"groups": [{"name": "g", "rules": [broken]}]}))
    assert _promtool("check", "rules", str(path)).returncode != 0


# -- alerts and scrape config -----------------------------------------------------------------


def test_alert_expressions_compare_declared_metrics_with_a_number() -> None:
    rules = alert_rules()
    assert set(rules) == {
        "CtxkitContextNearLimit",
        "CtxkitCompactionStorm",
        "CtxkitCompactionSlow",
        "CtxkitInvariantViolation",
        "CtxkitBudgetExceeded",
        "CtxkitAuditNotWritten",
        "CtxkitTargetDown",
    }
    for name, expr in rules.items():
        lhs, _op, _number = split_comparison(expr)
        assert metric_names(lhs), name
        # up: the series Prometheus itself writes for every scrape target.
        assert metric_names(lhs) <= exposed_names() | {"up"}, (name, metric_names(lhs))


def test_a_process_that_stops_answering_scrapes_is_alerted_on() -> None:
    """Every other alert reads a process's own metrics, so none fires for a process that is
    gone: this one reads Prometheus's up series for ctxkit's scrape jobs."""
    lhs, op, number = split_comparison(alert_rules()["CtxkitTargetDown"])
    assert (lhs, op, number) == ('up{job=~".*ctxkit.*"}', "==", "0")
    # The example scrape config's job is one it watches.
    assert "job_name: ctxkit\n" in (DASHBOARDS / "prometheus.yml").read_text(encoding="utf-8")


RUNBOOK = DASHBOARDS / "runbook.md"
AUDIT_ALERTS = DASHBOARDS / "audit-alerts.yml"
RULE_FILES = [ALERTS, AUDIT_ALERTS]
"""Every rules file with its unit tests beside it (NAME.test.yml): the process alerts, and
those of `ctxkit watch`."""


def test_every_alert_links_its_runbook_section() -> None:
    """Prometheus's convention: a runbook_url annotation, to a section that exists; no
    runbook prose in the annotations. The project owns no host, so the link is the runbook's
    path in the repository (where the rules are deployed, it is rewritten to the operator's
    copy)."""
    base = "dashboards/runbook.md"
    every: list[str] = []
    for rules_file in RULE_FILES:
        text = rules_file.read_text(encoding="utf-8")
        assert not re.search(r"^\s*runbook:", text, re.MULTILINE), "runbook_url, not runbook"
        urls = re.findall(r"^\s*runbook_url:\s*(\S+)\s*$", text, re.MULTILINE)
        rules = alert_rules(rules_file)
        assert urls == [f"{base}#{name.lower()}" for name in rules]
        # The unit tests expect the same links.
        tests = rules_file.with_suffix(".test.yml").read_text(encoding="utf-8")
        assert not re.search(r"^\s*runbook:", tests, re.MULTILINE)
        for name in rules:
            assert f'runbook_url: "{base}#{name.lower()}"' in tests, name
        every.extend(rules)
    # GitHub's anchor for a heading "## Name" is its lower-cased text.
    headings = re.findall(r"^## (\w+)$", RUNBOOK.read_text(encoding="utf-8"), re.MULTILINE)
    assert headings == every


def test_split_comparison_refuses_what_it_cannot_split() -> None:
    assert split_comparison("60 * sum by (a) (rate(x[5m])) > 10") == (
        "60 * sum by (a) (rate(x[5m]))",
        ">",
        "10",
    )
    assert split_comparison('max(x{a=">"}) >= 0.9')[1] == ">="
    for bad in ("sum(x > 1)", "x > bool 1", "x > 1 and y > 2", "x > y", "x"):
        with pytest.raises(ValueError, match="comparison"):
            split_comparison(bad)


@pytest.mark.parametrize("rules_file", RULE_FILES, ids=lambda p: p.name)
def test_alert_rules_pass_promtool_check(rules_file: Path) -> None:
    result = _promtool("check", "rules", str(rules_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules(rules_file))} rules found" in result.stdout


@pytest.mark.parametrize("rules_file", RULE_FILES, ids=lambda p: p.name)
def test_alert_unit_tests_pass(rules_file: Path) -> None:
    tests_file = rules_file.with_suffix(".test.yml")
    result = _promtool("test", "rules", tests_file.name)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every alert is tested, firing and not.
    tests = tests_file.read_text(encoding="utf-8")
    for name in alert_rules(rules_file):
        assert f"alertname: {name}\n        exp_alerts: []" in tests, name
        assert re.search(rf"alertname: {name}\n        exp_alerts:\n +- exp_labels:", tests), name


def test_alert_unit_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """The unit tests constrain the rules: a storm threshold of 1 a minute fails them."""
    rules = ALERTS.read_text(encoding="utf-8")
    loose = rules.replace("[5m])) > 10", "[5m])) > 1")
    assert loose != rules
    (tmp_path / "alerts.yml").write_text(loose)
    (tmp_path / "alerts.test.yml").write_bytes((DASHBOARDS / "alerts.test.yml").read_bytes())
    result = _promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "CtxkitCompactionStorm" in result.stdout + result.stderr


def test_example_scrape_config_is_valid_from_any_directory(tmp_path: Path) -> None:
    result = _promtool("check", "config", str(DASHBOARDS / "prometheus.yml"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout
    config = (DASHBOARDS / "prometheus.yml").read_text(encoding="utf-8")
    assert "job_name: ctxkit" in config
    assert '"127.0.0.1:9464"' in config
