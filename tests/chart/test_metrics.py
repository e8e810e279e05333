"""Every metric the Grafana dashboard and the alert rules query is registered by
``services/common/metrics.py`` (read back from ``prometheus_client.REGISTRY``), and every
label they group or match by exists on one of the metrics of that expression; ``promtool``
accepts the rendered rules, and its rule unit tests show each alert firing (and staying
quiet) on synthetic series."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helpers import CHART, RELEASE, one, render
from tests.conftest import require_binary

DASHBOARD = CHART / "dashboards" / "evoharness.json"
#: Labels Prometheus or the Kubernetes service discovery attach to every scraped series.
TARGET_LABELS = {"namespace", "job", "instance", "pod", "service", "endpoint", "container"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or"}
KEYWORDS |= {"unless", "bool", "offset", "inf", "nan"}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def registered() -> dict[str, set[str]]:
    """Sample name -> label names, for every metric ``services.common.metrics`` registers
    (counters as ``_total``, histograms as ``_bucket``/``_sum``/``_count``)."""
    import prometheus_client

    import services.common.metrics as m

    labels = {
        w._name: set(w._labelnames)
        for w in vars(m).values()
        if isinstance(w, prometheus_client.metrics.MetricWrapperBase)
    }
    out: dict[str, set[str]] = {}
    for fam in prometheus_client.REGISTRY.collect():
        if fam.name not in labels:
            continue
        names = {
            "counter": [f"{fam.name}_total"],
            "gauge": [fam.name],
            "histogram": [f"{fam.name}_{s}" for s in ("bucket", "sum", "count")],
        }[fam.type]
        for n in names:
            out[n] = labels[fam.name] | ({"le"} if n.endswith("_bucket") else set())
    return out


def _substitute(expr: str) -> str:
    """Grafana variables -> valid PromQL."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", "1h")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names (in matchers or grouping clauses) or durations."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = GROUPING.sub(" ", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        tail = e[m.end() :].lstrip()
        if tail.startswith("(") or m.group().lower() in KEYWORDS:
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # 1e-9, 0.5 ...
        names.add(m.group())
    return names


def grouping_labels(expr: str) -> set[str]:
    """Label names used in by/without/on/ignoring/group_* clauses and in matchers."""
    out = set()
    for _, inner in GROUPING.findall(expr):
        out |= {x.strip() for x in inner.split(",") if x.strip()}
    for sel in re.findall(r"\{([^}]*)\}", expr):
        out |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", sel))
    return out


def dashboard_exprs() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and templating query of the dashboard."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    for v in dash["templating"]["list"]:
        m = re.match(r"label_values\((.+),\s*\w+\)$", str(v.get("definition", "")))
        if m:
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def rule_groups() -> list[dict[str, Any]]:
    """The rendered PrometheusRule's groups (default values)."""
    rule = one(render("default"), "PrometheusRule", f"{RELEASE}-evoharness")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alert_exprs() -> list[tuple[str, str]]:
    return [(f"alert {r['alert']}", r["expr"]) for g in rule_groups() for r in g["rules"]]


def test_extraction_finds_metrics_not_functions() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, backend) (rate(evoharness_x_bucket{code!="OK"}'
        "[5m]))) / on (run_id) group_left () max(up) > 1e-9 and time() - foo_bar offset 5m"
    )
    assert metric_names(expr) == {"evoharness_x_bucket", "up", "foo_bar"}
    assert grouping_labels(expr) == {"le", "backend", "code", "run_id"}


def test_every_queried_metric_is_registered() -> None:
    known = registered()
    assert "evoharness_generation_latency_seconds_bucket" in known
    assert "evoharness_generation_requests_total" in known
    exprs = dashboard_exprs() + alert_exprs()
    assert len(exprs) >= 30
    used: set[str] = set()
    for where, expr in exprs:
        names = metric_names(_substitute(expr))
        assert names, f"{where}: no metric in {expr!r}"
        unknown = names - set(known)
        assert not unknown, (
            f"{where}: {sorted(unknown)} not registered in services/common/metrics.py"
        )
        allowed = set().union(*(known[n] for n in names)) | TARGET_LABELS
        bad = grouping_labels(expr) - allowed
        assert not bad, f"{where}: labels {sorted(bad)} exist on none of {sorted(names)}"
        used |= names
    # the dashboard covers the areas the brief names
    for must in (
        "evoharness_evolution_progress_ratio",
        "evoharness_pass_rate",
        "evoharness_decisions_total",
        "evoharness_regression",
        "evoharness_spend_usd_total",
        "evoharness_llm_cost_usd_total",
        "evoharness_generation_latency_seconds_bucket",
        "evoharness_images_generated_total",
        "evoharness_cache_hits_total",
        "evoharness_generation_errors_total",
        "evoharness_traffic_drift",
        "evoharness_traffic_failure_rate",
        "evoharness_traffic_sampled_total",
    ):
        assert must in used, must


def test_required_alerts_compare_the_right_metrics() -> None:
    alerts = {r["alert"]: r["expr"] for g in rule_groups() for r in g["rules"]}
    pairs = {
        "EvoharnessPostPromotionRegression": {
            "evoharness_postpromotion_regression",
            "evoharness_postpromotion_epsilon",
        },
        "EvoharnessSpendOverBudget": {"evoharness_spend_usd_total", "evoharness_budget_usd"},
        "EvoharnessGenerationErrorRate": {
            "evoharness_generation_errors_total",
            "evoharness_generation_requests_total",
        },
        "EvoharnessWorkflowStuck": {"evoharness_workflow_last_progress_timestamp_seconds"},
        "EvoharnessTrafficDrift": {
            "evoharness_traffic_drift",
            "evoharness_traffic_window_records",
        },
        "EvoharnessTrafficFailureRate": {
            "evoharness_traffic_failure_rate",
            "evoharness_traffic_window_records",
        },
    }
    for alert, names in pairs.items():
        assert metric_names(alerts[alert]) == names, alert


def _write_rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    return path


def test_promtool_accepts_the_rendered_rules(tmp_path: Path) -> None:
    promtool = require_binary("promtool")
    path = _write_rules(tmp_path)
    out = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    n = sum(len(g["rules"]) for g in rule_groups())
    assert f"SUCCESS: {n} rules found" in out.stdout + out.stderr


# Synthetic series (1m steps) and the alerts expected at given times. Values follow
# `promtool test rules` notation: 'a+bxN' = a, a+b, ... (N+1 samples); '_' = missing.
UNIT_TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'evoharness_postpromotion_regression{namespace="ns", channel="prod"}'
        values: '0.01x4 0.05x20'
      - series: 'evoharness_postpromotion_epsilon{namespace="ns", channel="prod"}'
        values: '0.02x24'
      - series: 'evoharness_spend_usd_total{namespace="ns", run_id="r1", kind="generator"}'
        values: '0+1x24'
      - series: 'evoharness_budget_usd{namespace="ns", run_id="r1"}'
        values: '20x24'
      - series: 'evoharness_workflow_last_progress_timestamp_seconds{namespace="ns", run_id="r1"}'
        values: '0x120'
      - series: 'evoharness_generation_requests_total{namespace="ns", backend="sim", code="OK"}'
        values: '0+100x60'
      - series: 'evoharness_generation_errors_total{namespace="ns", backend="sim", code="INTERNAL"}'
        values: '0x20 0+20x40'
      - series: 'evoharness_traffic_window_records{namespace="ns", channel="prod"}'
        values: '10+10x4 50x60'
      - series: 'evoharness_traffic_drift{namespace="ns", channel="prod", distribution="kinds"}'
        values: '0.05x10 0.6x60'
      - series: 'evoharness_traffic_failure_rate{namespace="ns", channel="prod", feature="count"}'
        values: '0.2x10 0.8x60'
      - series: 'evoharness_traffic_failure_rate{namespace="ns", channel="prod", feature="color"}'
        values: '0.1x70'
    alert_rule_test:
      - {eval_time: 3m, alertname: EvoharnessPostPromotionRegression, exp_alerts: []}
      - eval_time: 8m
        alertname: EvoharnessPostPromotionRegression
        exp_alerts:
          - exp_labels: {severity: critical, namespace: ns, channel: prod}
            exp_annotations:
              summary: Preservation regression after promotion on channel prod
              description: "Regression 0.0500 exceeds the gate's epsilon after the last promotion; consider rolling the channel back (evoharness registry rollback)."
      - {eval_time: 19m, alertname: EvoharnessSpendOverBudget, exp_alerts: []}
      - eval_time: 21m
        alertname: EvoharnessSpendOverBudget
        exp_alerts:
          - exp_labels: {severity: critical, namespace: ns, run_id: r1}
            exp_annotations:
              summary: Evolution run r1 spent more than its budget
              description: Spend is 21.00 USD, over the run's budget cap.
      - {eval_time: 30m, alertname: EvoharnessWorkflowStuck, exp_alerts: []}
      - eval_time: 70m
        alertname: EvoharnessWorkflowStuck
        exp_alerts:
          - exp_labels: {severity: warning, namespace: ns, run_id: r1}
            exp_annotations:
              summary: Evolution run r1 made no progress
              description: No progress for 1h 10m 0s; check the Temporal workflow and the worker logs.
      - {eval_time: 19m, alertname: EvoharnessGenerationErrorRate, exp_alerts: []}
      - eval_time: 45m
        alertname: EvoharnessGenerationErrorRate
        exp_alerts:
          - exp_labels: {severity: warning, namespace: ns, backend: sim}
            exp_annotations:
              summary: Generation backend sim is failing
              description: 20% of generation requests failed over 10 minutes.
      - {eval_time: 35m, alertname: EvoharnessTrafficDrift, exp_alerts: []}
      - eval_time: 45m
        alertname: EvoharnessTrafficDrift
        exp_alerts:
          - exp_labels: {severity: warning, namespace: ns, channel: prod}
            exp_annotations:
              summary: Traffic on channel prod drifted from what its harness was evolved on
              description: "Jensen-Shannon distance 0.60; build tasks from recent traffic (evoharness tasks from-traffic) and evolve on them."
      - {eval_time: 35m, alertname: EvoharnessTrafficFailureRate, exp_alerts: []}
      - eval_time: 45m
        alertname: EvoharnessTrafficFailureRate
        exp_alerts:
          - exp_labels: {severity: warning, namespace: ns, channel: prod, feature: count}
            exp_annotations:
              summary: count constraints fail on channel prod
              description: 80% of recent count verdicts failed.
"""


def test_alerts_fire_on_synthetic_series_and_stay_quiet_before(tmp_path: Path) -> None:
    promtool = require_binary("promtool")
    _write_rules(tmp_path)
    (tmp_path / "tests.yaml").write_text(UNIT_TESTS)
    out = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("where", ["dashboard", "alerts"])
def test_exprs_are_parseable_promql(where: str, tmp_path: Path) -> None:
    """promtool parses every expression (as recording rules), Grafana variables substituted."""
    promtool = require_binary("promtool")
    exprs = dashboard_exprs() if where == "dashboard" else alert_exprs()
    rules = [
        {"record": f"evoharness:check:{i}", "expr": _substitute(e)}
        for i, (_, e) in enumerate(exprs)
    ]
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "check", "rules": rules}]}))
    out = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_standalone_rules_file_matches_the_chart() -> None:
    """deploy/prometheus/rules.yaml (for Prometheus without the operator) is the chart's
    rendered rules; regenerate it (command in its header) after changing the template."""
    path = CHART.parents[1] / "deploy" / "prometheus" / "rules.yaml"
    assert yaml.safe_load(path.read_text()) == {"groups": rule_groups()}
