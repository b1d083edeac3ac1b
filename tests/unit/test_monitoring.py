"""deploy/monitoring: the alert rules pass ``promtool check rules`` and their unit tests (every alert firing and
not firing), and every metric the rules and the Grafana dashboard query is one the reconciler or the webhook
exports, so that a renamed metric breaks the build; the example scrape configuration keeps the Services'
names and ports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from reconciler.mpijob.metrics import OperatorMetrics
from webhook.metrics import WebhookMetrics

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
RULE_TESTS = Path(__file__).parent / "promtool" / "rules_test.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian's prometheus "
                                                             "package; `make promtool` installs it as root)")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
# PromQL words that look like metric names: aggregation modifiers, set operators, and what Prometheus itself adds
NOT_METRICS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
               "offset", "inf", "nan", "up"}


def exported_names() -> set[str]:
    """Every sample name the reconciler and the webhook can serve (counters by ``_total``, histograms by their
    three series), from their own registries."""
    reconciler = OperatorMetrics(CollectorRegistry())
    reconciler.watch_jobs([])
    reconciler.watch_queue(lambda: 0)
    webhook = WebhookMetrics()
    loaded = SimpleNamespace(not_after=datetime(2027, 1, 1, tzinfo=UTC))
    webhook.watch_certificate(SimpleNamespace(reload_count=1, failure_count=0, loaded=loaded))  # type: ignore[arg-type]
    return {family.name + suffix for registry in (reconciler.registry, webhook.registry)
            for family in registry.collect() for suffix in SUFFIXES[family.type]}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: label matchers, range and grouping clauses, strings and
    function calls removed."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = re.findall(r"(?<![\w.$])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {word for word in words if word.lower() not in NOT_METRICS}


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
            for target in panel["targets"]]


@pytest.mark.parametrize(("expr", "names"), [
    pytest.param('sum by (kind) (rate(a_total{kind!="x"}[5m])) > 0', {"a_total"}, id="grouping-and-matchers"),
    pytest.param("max(b) < 1 or absent(c)", {"b", "c"}, id="set-operator"),
    pytest.param("histogram_quantile(0.99, sum by (le) (rate(d_bucket[$__rate_interval])))", {"d_bucket"},
                 id="grafana-interval"),
    pytest.param("min(e) - time() < 14 * 86400", {"e"}, id="arithmetic"),
])
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_rules_and_the_dashboard_query_only_exported_metrics() -> None:
    exported = exported_names()
    used = {name: where for where, exprs in (("rules", [r["expr"] for r in rules()]), ("dashboard", dashboard_exprs()))
            for expr in exprs for name in metric_names(expr)}
    assert {name: where for name, where in used.items() if name not in exported} == {}
    assert len(used) >= 15  # the parser found the metrics: the whole check would pass on an empty set


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
             for case in test.get("alert_rule_test", [])]
    assert {case["alertname"] for case in cases if case["exp_alerts"]} == alerts, "a firing case per alert"
    assert {case["alertname"] for case in cases if not case["exp_alerts"]} == alerts, "a silent case per alert"


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    result = subprocess.run([str(PROMTOOL), "check", "rules", str(RULES)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


@needs_promtool
def test_promtool_rule_unit_tests_pass() -> None:
    result = subprocess.run([str(PROMTOOL), "test", "rules", RULE_TESTS.name], capture_output=True, text=True,
                            check=False, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["Unit", "Testing:", RULE_TESTS.name, "SUCCESS"]


def test_the_scrape_config_keeps_the_services_names_and_ports() -> None:
    config = yaml.safe_load((MONITORING / "prometheus-scrape.yaml").read_text(encoding="utf-8"))
    keeps = {job["job_name"]: next(r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep")
             for job in config["scrape_configs"]}
    services = {}
    for path in (ROOT / "deploy" / "webhook" / "service.yaml", MONITORING / "reconciler-metrics-service.yaml"):
        service = yaml.safe_load(path.read_text(encoding="utf-8"))
        services[service["metadata"]["name"]] = [port["name"] for port in service["spec"]["ports"]]
    assert services == {"mpijob-webhook": ["https"], "mpi-operator-metrics": ["metrics"]}
    assert keeps == {"mpi-operator-reconciler": "mpi-operator-metrics;metrics",
                     "mpi-operator-webhook": "mpijob-webhook;https"}
