"""deploy/monitoring: the alert rules pass ``promtool check rules`` and their unit tests (every alert firing and
not firing), and every metric the rules and the Grafana dashboard query is one the reconciler or the webhook
exports, so that a renamed metric breaks the build; the example scrape configuration keeps the Services'
names and ports."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client import CollectorRegistry

from reconciler.mpijob.metrics import OperatorMetrics
from tests.monitoring import (
    MONITORING,
    ROOT,
    RULES,
    alerts,
    dashboard_exprs,
    dashboard_panels,
    grafana_query,
    metric_names,
    rules,
    without_threshold,
)
from webhook.metrics import WebhookMetrics

RULE_TESTS = Path(__file__).parent / "promtool" / "rules_test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian's prometheus "
                                                             "package; `make promtool` installs it as root)")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


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


def test_the_extraction_finds_every_exported_metric_an_expression_names() -> None:
    """metric_names misses none: each exported name that occurs in an expression as a word is among the names it
    extracts (tests/e2e/test_monitoring.py asks the real Prometheus for a series of each extracted name, so a name
    missed here would go unchecked there)."""
    exported = exported_names()
    missed = {}
    for expr in [*alerts().values(), *dashboard_exprs()]:
        named = {name for name in exported if re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr)}
        if named - metric_names(expr):
            missed[expr] = sorted(named - metric_names(expr))
    assert missed == {}


@pytest.mark.parametrize(("expr", "compared"), [
    pytest.param("max(a) > 1800", "max(a)", id="greater"),
    pytest.param("max(b) < 1 or absent(b)", "max(b) or absent(b)", id="set-operator-after"),
    pytest.param('sum(rate(c_total{kind!="conflict"}[5m])) > 0.1', 'sum(rate(c_total{kind!="conflict"}[5m]))',
                 id="not-equal-matcher-kept"),
    pytest.param("min(d) - time() < 14 * 86400", "min(d) - time()", id="literal-arithmetic"),
    pytest.param("e >= bool 1e3", "e", id="bool-and-exponent"),
    pytest.param("f{le=\"0.5\"} == 2", "f{le=\"0.5\"}", id="equal"),
])
def test_without_threshold(expr: str, compared: str) -> None:
    assert without_threshold(expr) == compared


def test_without_threshold_refuses_an_expression_without_one() -> None:
    with pytest.raises(ValueError, match="no threshold"):
        without_threshold("sum(rate(a_total[5m])) > sum(rate(b_total[5m]))")


def test_every_alert_has_a_threshold_that_removing_leaves_its_metrics() -> None:
    """Each alert compares a query with a literal; without it (what the e2e test evaluates) the same metrics are
    selected and no comparison is left."""
    for name, expr in alerts().items():
        compared = without_threshold(expr)
        assert metric_names(compared) == metric_names(expr), name
        assert not re.search(r"[<>]|==|!=(?!\")", compared), (name, compared)
    assert len(alerts()) == len(rules()) == 9


def test_every_panel_query_has_its_grafana_variables_filled_in() -> None:
    panels = dashboard_panels()
    assert len(panels) == 14
    assert all(panels.values())
    queries = [grafana_query(expr) for expr in dashboard_exprs()]
    assert "$" not in "".join(queries)
    assert "rate(mpi_operator_workqueue_retries_total[1m])" in "".join(queries)
    with pytest.raises(ValueError, match="variable"):
        grafana_query("rate(a_total[$window])")


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
    assert "SUCCESS: 9 rules found" in result.stdout


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
