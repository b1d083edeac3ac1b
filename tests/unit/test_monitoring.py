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
from prometheus_client import CollectorRegistry, ProcessCollector

from reconciler.certs.rotator import RotationMetrics
from reconciler.mpijob.metrics import OperatorMetrics
from tests.monitoring import (
    EXTERNAL_METRICS,
    MONITORING,
    ROOT,
    RULES,
    SCOPE_VARIABLES,
    alerts,
    dashboard,
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
    three series), from their own registries: the reconciler's (prometheus_client's default registry, with its
    process collector, and the managed certificates' rotation) and the webhook's."""
    reconciler = OperatorMetrics(CollectorRegistry())
    RotationMetrics(reconciler.registry)
    ProcessCollector(registry=reconciler.registry)
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
    assert {name: where for name, where in used.items() if name not in exported | EXTERNAL_METRICS} == {}
    assert used.keys() >= EXTERNAL_METRICS
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
    assert len(alerts()) == len(rules()) == 13


def test_every_panel_query_has_its_grafana_variables_filled_in() -> None:
    panels = dashboard_panels()
    assert len(panels) == 19
    assert all(panels.values())
    queries = [grafana_query(expr) for expr in dashboard_exprs()]
    assert "$" not in "".join(queries)
    assert 'rate(mpi_operator_workqueue_retries_total{cluster=~".*", namespace=~".*"}[1m])' in "".join(queries)
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
    assert "SUCCESS: 13 rules found" in result.stdout


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


def test_the_scrape_config_discovers_endpointslices_with_no_more_rights_than_the_rbac_example() -> None:
    """Kubernetes service discovery through EndpointSlices (core v1 Endpoints are deprecated since 1.33), their own
    meta labels relabelled, and a Role granting list and watch on what that role reads, in mpi-operator only."""
    config = yaml.safe_load((MONITORING / "prometheus-scrape.yaml").read_text(encoding="utf-8"))
    assert [sd for job in config["scrape_configs"] for sd in job["kubernetes_sd_configs"]] == [
        {"role": "endpointslice", "namespaces": {"names": ["mpi-operator"]}}] * 2
    sources = {label for job in config["scrape_configs"] for rule in job["relabel_configs"]
               for label in rule["source_labels"]}
    assert sources == {"__meta_kubernetes_service_name", "__meta_kubernetes_endpointslice_port_name",
                       "__meta_kubernetes_pod_name", "__meta_kubernetes_namespace"}
    objects = {(o["kind"], o["metadata"]["name"]): o
               for o in yaml.safe_load_all((MONITORING / "prometheus-rbac.yaml").read_text(encoding="utf-8"))}
    role = objects["Role", "prometheus-mpi-operator"]
    assert role["metadata"]["namespace"] == "mpi-operator"
    assert role["rules"] == [
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["services", "pods"], "verbs": ["list", "watch"]}]
    assert objects["RoleBinding", "prometheus-mpi-operator"]["roleRef"]["name"] == "prometheus-mpi-operator"


def test_the_restart_alert_selects_the_reconcilers_process_by_a_metric_only_it_serves() -> None:
    """process_start_time_seconds is every Python and Go program's: the alert keeps the targets that also serve
    mpi_operator_is_leader, which the webhook does not export."""
    expr = alerts()["MPIOperatorReconcilerRestarting"]
    assert expr == ("changes(process_start_time_seconds[30m]) >= 3 "
                    "and on (job, instance) present_over_time(mpi_operator_is_leader[30m])")
    webhook = {family.name for family in WebhookMetrics().registry.collect()}
    assert not webhook & {"mpi_operator_is_leader", "process_start_time_seconds"}, webhook


def test_the_dashboard_has_cluster_and_namespace_variables_with_all() -> None:
    """Behind Thanos or Mimir one cluster must not hide another: both variables list the label's values of the
    reconciler's series and default to All, whose regex also matches a series without the label."""
    variables = {var["name"]: var for var in dashboard()["templating"]["list"]}
    assert list(variables) == ["datasource", *SCOPE_VARIABLES]
    for name in SCOPE_VARIABLES:
        var = variables[name]
        assert {key: var[key] for key in ("type", "includeAll", "allValue", "multi", "refresh")} == {
            "type": "query", "includeAll": True, "allValue": ".*", "multi": True, "refresh": 2}, name
        assert var["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert var["current"]["value"] == ["$__all"]
    assert variables["cluster"]["query"]["query"] == "label_values(mpi_operator_is_leader, cluster)"
    assert variables["namespace"]["query"]["query"] == \
        'label_values(mpi_operator_is_leader{cluster=~"$cluster"}, namespace)'


def selectors(expr: str) -> list[tuple[str, str]]:
    """Each metric selector of EXPR: its name and its label matchers ("" when it has none)."""
    return re.findall(r"(?<![\w:])([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?(?=\s*[\[)\s])", expr.replace("(", "( ") + " ")


def test_every_dashboard_selector_is_scoped_by_the_variables() -> None:
    """Every metric every panel selects is filtered by cluster, and by namespace unless it is the API server's
    (scraped in the API server's namespace, not the operator's)."""
    unscoped = []
    checked = 0
    for expr in dashboard_exprs():
        for name, matchers in selectors(expr):
            if name not in metric_names(expr) and name != "up":
                continue
            wanted = ['cluster=~"$cluster"'] + ([] if name in EXTERNAL_METRICS else ['namespace=~"$namespace"'])
            checked += 1
            if not all(m in [part.strip() for part in matchers.split(",")] for m in wanted):
                unscoped.append((name, expr))
    assert unscoped == []
    assert checked == len(dashboard_exprs()) == 28


def test_the_dashboard_has_the_panels_the_sizing_section_and_the_new_alerts_rely_on() -> None:
    panels = dashboard_panels()
    assert {title: exprs for title, exprs in panels.items() if title in {
        "Reconciler memory (RSS) by pod", "Reconciler CPU by pod", "Webhook replicas up",
        "Managed certificate renewals and rotation errors (per hour)",
        "MPIJobs admitted without the defaulting webhook (API server, per hour)"}} == {
        "Reconciler memory (RSS) by pod": [
            'sum by (pod) (process_resident_memory_bytes{cluster=~"$cluster", namespace=~"$namespace", '
            'pod=~"mpi-operator-.+"})'],
        "Reconciler CPU by pod": [
            'sum by (pod) (rate(process_cpu_seconds_total{cluster=~"$cluster", namespace=~"$namespace", '
            'pod=~"mpi-operator-.+"}[$__rate_interval]))'],
        "Webhook replicas up": ['sum(up{cluster=~"$cluster", namespace=~"$namespace", pod=~"mpijob-webhook-.+"})'],
        "Managed certificate renewals and rotation errors (per hour)": [
            'sum by (certificate) (increase(mpi_operator_webhook_certificate_renewals_total{cluster=~"$cluster", '
            'namespace=~"$namespace"}[1h]))',
            'sum(increase(mpi_operator_webhook_certificate_errors_total{cluster=~"$cluster", '
            'namespace=~"$namespace"}[1h]))'],
        "MPIJobs admitted without the defaulting webhook (API server, per hour)": [
            'sum(increase(apiserver_admission_webhook_fail_open_count{cluster=~"$cluster", '
            'name="mpijob-defaulter.kubeflow.org"}[1h]))'],
    }
    ids = [panel["id"] for panel in dashboard()["panels"]]
    assert len(ids) == len(set(ids)) == 19


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of MARKDOWN (lower case, punctuation but - and _ dropped)."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)}


def test_every_alert_links_its_runbook_in_the_operator_guide() -> None:
    guide = (ROOT / "docs" / "operator-guide.md").read_text(encoding="utf-8")
    urls = {rule["alert"]: rule["annotations"]["runbook_url"] for rule in rules()}
    assert urls == {name: f"docs/operator-guide.md#{name.lower()}" for name in alerts()}
    assert {url.split("#")[1] for url in urls.values()} <= github_anchors(guide)


def test_the_fail_open_alerts_name_the_mutating_webhooks_whose_failure_policy_is_ignore() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "webhook" / "mutating-webhook-configuration.yaml").read_text())
    # the MPIJob defaulter; the IndexedJob backend's pod webhook (also Ignore) admits no MPIJob
    webhook, pods = config["webhooks"]
    assert pods["rules"][0]["resources"] == ["pods"]
    assert webhook["failurePolicy"] == "Ignore"
    assert f'{{name="{webhook["name"]}"}}' in alerts()["MPIJobWebhookFailOpen"]
    assert pods["failurePolicy"] == "Ignore"
    assert f'{{name="{pods["name"]}"}}' in alerts()["MPIJobWorkerRankWebhookFailOpen"]
