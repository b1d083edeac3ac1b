"""deploy/monitoring's alert rules and Grafana dashboard as PromQL: the expressions, the metric names each one
selects, an alert's expression without its threshold and a panel's query with Grafana's variables filled in.
Shared by tests/unit/test_monitoring.py (against the exported metrics, with promtool) and
tests/e2e/test_monitoring.py (against a real Prometheus that scraped the operator)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
SCRAPE = MONITORING / "prometheus-scrape.yaml"
# PromQL words that look like metric names: aggregation modifiers, set operators, and what Prometheus itself adds
NOT_METRICS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
               "offset", "inf", "nan", "up"}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# a comparison with a scalar literal (or literal arithmetic, `< 14 * 86400`) on its right: an alert's threshold
THRESHOLD = re.compile(rf"\s*(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?{_NUMBER}(?:\s*[-+*/%^]\s*{_NUMBER})*(?![\w.])")
# Grafana's interval variables, as Grafana fills them for a Prometheus that scrapes every few seconds, and the
# dashboard's cluster and namespace variables as "All" fills them (allValue: a regex that also matches no label)
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h", "$cluster": ".*",
                     "$namespace": ".*"}
# the dashboard's template variables that every panel's query filters by
SCOPE_VARIABLES = ("cluster", "namespace")
# metrics the rules and the dashboard select that the operator does not export: the API server's own
EXTERNAL_METRICS = {"apiserver_admission_webhook_fail_open_count"}
# metrics with no series where only the operator is scraped, with the default certificates: the API server's, and
# the managed certificates' rotation (the reconciler registers it with --manage-webhook-certificates only)
CONDITIONAL_METRICS = {
    **dict.fromkeys(EXTERNAL_METRICS, "the API server's metric"),
    **dict.fromkeys(("mpi_operator_webhook_certificate_renewals_total",
                     "mpi_operator_webhook_certificate_errors_total"), "managed certificates only"),
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: label matchers, range and grouping clauses, strings and
    function calls removed."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = re.findall(r"(?<![\w.$])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {word for word in words if word.lower() not in NOT_METRICS}


def without_threshold(expr: str) -> str:
    """EXPR with each comparison against a literal removed (`max(x) < 1 or absent(x)` -> `max(x) or absent(x)`):
    what an alert compares, which returns a sample per series whether or not the alert would fire. Raises
    ValueError when EXPR has no such comparison."""
    stripped, count = THRESHOLD.subn("", expr)
    if not count:
        raise ValueError(f"no threshold (a comparison with a number) in {expr!r}")
    return " ".join(stripped.split())


def grafana_query(expr: str) -> str:
    """A panel's query as Grafana sends it: its interval variables replaced (GRAFANA_VARIABLES). Raises
    ValueError for a variable this does not know."""
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    if "$" in expr:
        raise ValueError(f"a dashboard variable that the tests do not fill in: {expr!r}")
    return expr


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for rule in group["rules"]]


def alerts() -> dict[str, str]:
    """Each alert's name and expression."""
    return {rule["alert"]: " ".join(rule["expr"].split()) for rule in rules() if "alert" in rule}


def dashboard_panels() -> dict[str, list[str]]:
    """Each dashboard panel's title and the expressions of its targets."""
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    return {panel["title"]: [target["expr"] for target in panel["targets"]] for panel in panels}


def dashboard_exprs() -> list[str]:
    return [expr for exprs in dashboard_panels().values() for expr in exprs]


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text(encoding="utf-8")))
