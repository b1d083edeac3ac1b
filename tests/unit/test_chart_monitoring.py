"""The Helm chart's monitoring values (values.yaml `monitoring`, all off by default, so that the default render stays
`kubectl kustomize deploy/`): the reconciler's metrics Service, the ServiceMonitors, the PrometheusRule and the
Grafana dashboard's ConfigMap, each rendered as a whole object and compared with the one expected; the
PrometheusRule's groups are the alert rules of deploy/monitoring/prometheus-rules.yaml, read from the chart's copy,
so the two cannot drift, with the per-alert overrides and the runbook base URL applied; the ServiceMonitors
select the Services and ports the shipped scrape config keeps. Needs helm, as tests/unit/test_chart.py; the
Prometheus Operator's CRDs are not needed (tests/integration/test_chart_monitoring.py validates the objects
against them on an API server)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster.helm import CHART, HelmError, value_flags
from hack.gen import chart as gen_chart
from tests.monitoring import DASHBOARD, MONITORING, RULES, SCRAPE
from tests.unit.test_chart import CA_BUNDLE, Key, changes, default_render, render, template

PART_OF = {"app.kubernetes.io/part-of": "mpijob-operator"}
METRICS_SERVICE: Key = ("Service", "mpi-operator", "mpi-operator-metrics")
RECONCILER_MONITOR: Key = ("ServiceMonitor", "mpi-operator", "mpi-operator-reconciler")
WEBHOOK_MONITOR: Key = ("ServiceMonitor", "mpi-operator", "mpi-operator-webhook")
RULE: Key = ("PrometheusRule", "mpi-operator", "mpi-operator")
CA_CONFIG_MAP: Key = ("ConfigMap", "mpi-operator", "mpijob-webhook-ca")
DASHBOARD_CONFIG_MAP: Key = ("ConfigMap", "mpi-operator", "mpi-operator-grafana-dashboard")
MANUAL = {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE}


def rendered(values: dict[str, str]) -> dict[Key, Any]:
    return render(tuple(value_flags(values)))


def added(values: dict[str, str]) -> dict[Key, Any]:
    """The objects VALUES add to the render with BASE (the default, or the manual certificates'), asserting that
    they change nothing else."""
    base = MANUAL if values.keys() & MANUAL.keys() else {}
    before = rendered(base) if base else default_render()
    after = rendered(values)
    diff = changes(before, after)
    assert all(what == {"(added)"} for what in diff.values()), diff
    return {key: after[key] for key in diff}


def metrics_service(port: int = 9090) -> dict[str, Any]:
    """deploy/monitoring/reconciler-metrics-service.yaml with kustomize's part-of label, on PORT."""
    service: dict[str, Any] = yaml.safe_load((MONITORING / "reconciler-metrics-service.yaml").read_text())
    service["metadata"]["labels"].update(PART_OF)
    service["spec"]["ports"][0].update(port=port, targetPort=port)
    return service


def service_monitor(name: str, component: str, service: str, endpoint: dict[str, Any],
                    labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": name, "namespace": "mpi-operator",
                         "labels": {"app.kubernetes.io/component": component, **PART_OF, **(labels or {})}},
            "spec": {"namespaceSelector": {"matchNames": ["mpi-operator"]},
                     "selector": {"matchLabels": {"app.kubernetes.io/name": service}}, "endpoints": [endpoint]}}


def monitors(ca: dict[str, Any], labels: dict[str, str] | None = None, **endpoint: str) -> dict[Key, Any]:
    return {
        RECONCILER_MONITOR: service_monitor("mpi-operator-reconciler", "reconciler", "mpi-operator-metrics",
                                            {"port": "metrics", "path": "/metrics", **endpoint}, labels),
        WEBHOOK_MONITOR: service_monitor("mpi-operator-webhook", "webhook", "mpijob-webhook", {
            "port": "https", "path": "/metrics", "scheme": "https", **endpoint,
            "tlsConfig": {"serverName": "mpijob-webhook.mpi-operator.svc", "ca": ca}}, labels)}


CERT_MANAGER_CA = {"secret": {"name": "mpijob-webhook-tls", "key": "ca.crt"}}


def test_the_default_render_has_no_monitoring_object() -> None:
    kinds = {key[0] for key in default_render()}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert METRICS_SERVICE not in default_render()


def test_the_metrics_service_alone_is_deploys() -> None:
    assert added({"monitoring.metricsService.enabled": "true"}) == {METRICS_SERVICE: metrics_service()}


def test_the_metrics_service_follows_the_reconcilers_port() -> None:
    after = rendered({"monitoring.metricsService.enabled": "true", "reconciler.monitoringPort": "9100"})
    assert after[METRICS_SERVICE] == metrics_service(9100)


def test_service_monitors_with_cert_manager() -> None:
    """The reconciler through the metrics Service (rendered with them), the webhook over TLS checked against the
    CA cert-manager writes into the serving certificate's Secret."""
    assert added({"monitoring.serviceMonitor.enabled": "true"}) == {
        METRICS_SERVICE: metrics_service(), **monitors(CERT_MANAGER_CA)}


def test_service_monitors_with_labels_and_an_interval() -> None:
    values = {"monitoring.serviceMonitor.enabled": "true", "monitoring.serviceMonitor.labels.release": "kps",
              "monitoring.serviceMonitor.interval": "30s"}
    assert added(values) == {METRICS_SERVICE: metrics_service(),
                             **monitors(CERT_MANAGER_CA, {"release": "kps"}, interval="30s")}


def test_service_monitors_with_manual_certificates_read_the_ca_bundle() -> None:
    """The Secret of manual certificates may have no ca.crt: the CA comes from caBundle, in a ConfigMap."""
    assert added({**MANUAL, "monitoring.serviceMonitor.enabled": "true"}) == {
        METRICS_SERVICE: metrics_service(),
        **monitors({"configMap": {"name": "mpijob-webhook-ca", "key": "ca.crt"}}),
        CA_CONFIG_MAP: {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "mpijob-webhook-ca", "namespace": "mpi-operator",
                                     "labels": {"app.kubernetes.io/component": "webhook", **PART_OF}},
                        "data": {"ca.crt": base64.b64decode(CA_BUNDLE).decode()}}}


def test_service_monitors_scrape_what_the_shipped_scrape_config_keeps() -> None:
    """The same Services and ports as deploy/monitoring/prometheus-scrape.yaml (its keep regexes name
    service;port), and the same TLS server name for the webhook."""
    after = rendered({"monitoring.serviceMonitor.enabled": "true"})
    services = {key[2]: doc for key, doc in after.items() if key[0] == "Service"}
    selected = set()
    for key in (RECONCILER_MONITOR, WEBHOOK_MONITOR):
        spec = after[key]["spec"]
        (service,) = [name for name, doc in services.items()
                      if doc["metadata"]["labels"].items() >= spec["selector"]["matchLabels"].items()]
        port = spec["endpoints"][0]["port"]
        assert port in [p["name"] for p in services[service]["spec"]["ports"]]
        selected.add(f"{service};{port}")
    config = yaml.safe_load(SCRAPE.read_text())
    keeps = {rule["regex"] for job in config["scrape_configs"] for rule in job["relabel_configs"]
             if rule.get("action") == "keep"}
    assert selected == keeps
    (webhook_job,) = [job for job in config["scrape_configs"] if job.get("scheme") == "https"]
    assert after[WEBHOOK_MONITOR]["spec"]["endpoints"][0]["tlsConfig"]["serverName"] == \
        webhook_job["tls_config"]["server_name"]


def test_the_prometheus_rule_holds_deploys_alert_rules() -> None:
    """One source of truth: the PrometheusRule's spec is deploy/monitoring/prometheus-rules.yaml, whole."""
    values = {"monitoring.prometheusRule.enabled": "true", "monitoring.prometheusRule.labels.release": "kps"}
    assert added(values) == {RULE: {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator", "labels": {**PART_OF, "release": "kps"}},
        "spec": yaml.safe_load(RULES.read_text(encoding="utf-8"))}}


def test_the_charts_copy_of_the_rules_is_deploys() -> None:
    """The chart cannot read deploy/: its copy (hack/gen/chart.py, `make chart`) holds the same rules, and
    `make chart --check` (tests/unit/test_chart.py) fails when it is stale."""
    copy = CHART / "files" / "prometheus-rules.yaml"
    assert yaml.safe_load(copy.read_text(encoding="utf-8")) == yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert gen_chart.expected()[copy] == copy.read_text(encoding="utf-8")


def test_a_rule_changed_in_deploy_is_seen_as_a_stale_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = tmp_path / "deploy"
    (deploy / "monitoring").mkdir(parents=True)
    (deploy / "monitoring" / "prometheus-rules.yaml").write_text(RULES.read_text().replace("> 1800", "> 3600"))
    for name in ("grafana-dashboard.json", "reconciler-metrics-service.yaml"):  # the component's other sources
        (deploy / "monitoring" / name).write_text((MONITORING / name).read_text())
    (deploy / "kustomization.yaml").write_text((MONITORING.parent / "kustomization.yaml").read_text())
    monkeypatch.setattr(gen_chart, "DEPLOY", deploy)
    monkeypatch.setattr(gen_chart, "COPIES", {})
    monkeypatch.setattr(gen_chart, "VERBATIM", {"monitoring/prometheus-rules.yaml": "files/prometheus-rules.yaml"})
    assert "> 3600" in gen_chart.expected()[CHART / "files" / "prometheus-rules.yaml"]
    assert gen_chart.main(["--check"]) == 1


def test_service_monitor_without_reconciler_metrics_fails_with_the_reason() -> None:
    with pytest.raises(HelmError, match=r"reconciler\.monitoringPort is 0"):
        template(*value_flags({"monitoring.serviceMonitor.enabled": "true", "reconciler.monitoringPort": "0"}))


@pytest.mark.parametrize(("values", "message"), [
    pytest.param({"monitoring.serviceMonitor.interval": "30 seconds"},
                 "at '/monitoring/serviceMonitor/interval': '30 seconds' does not match pattern", id="interval"),
    pytest.param({"monitoring.prometheusRule.labels.release": "1"},
                 "at '/monitoring/prometheusRule/labels/release': got number, want string", id="label-value"),
    pytest.param({"monitoring.serviceMonitor.enable": "true"},
                 "at '/monitoring/serviceMonitor': additional properties 'enable' not allowed", id="misspelt"),
    pytest.param({"monitoring.metricsService.enabled": "yes"},
                 "at '/monitoring/metricsService/enabled': got string, want boolean", id="not-a-boolean"),
    pytest.param({"monitoring.prometheusRule.runbookBaseURL": "guide.md"},
                 "at '/monitoring/prometheusRule/runbookBaseURL': 'guide.md' does not match pattern", id="runbook-url"),
    pytest.param({"monitoring.prometheusRule.rules.MPIJobStuckPending.disable": "true"},
                 "at '/monitoring/prometheusRule/rules/MPIJobStuckPending': additional properties 'disable' not "
                 "allowed", id="misspelt-override"),
    pytest.param({"monitoring.prometheusRule.rules.MPIJobStuckPending.for": "2 hours"},
                 "at '/monitoring/prometheusRule/rules/MPIJobStuckPending/for': '2 hours' does not match pattern",
                 id="override-for"),
    pytest.param({"monitoring.grafanaDashboard.labels.x": "1"},
                 "at '/monitoring/grafanaDashboard/labels/x': got number, want string", id="dashboard-label"),
])
def test_schema_rejects_bad_monitoring_values(values: dict[str, str], message: str) -> None:
    with pytest.raises(HelmError) as raised:
        template(*value_flags(values))
    assert message in str(raised.value)


def test_lint_passes_with_everything_on() -> None:
    values = {"monitoring.serviceMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
              "monitoring.grafanaDashboard.enabled": "true"}
    for flags in (value_flags(values), value_flags({**values, **MANUAL})):
        assert "0 chart(s) failed" in template(*flags, command="lint")


def test_rule_overrides_and_the_runbook_base_url() -> None:
    """An alert left out, another's for, severity and labels changed, and every runbook_url on the base given:
    the PrometheusRule's spec is deploy's rules with exactly those changes."""
    values = {"monitoring.prometheusRule.enabled": "true",
              "monitoring.prometheusRule.runbookBaseURL": "https://git.example.com/o/r/blob/v1/docs/operator-guide.md",
              "monitoring.prometheusRule.rules.MPIJobWebhookSlow.disabled": "true",
              "monitoring.prometheusRule.rules.MPIJobStuckPending.for": "2h",
              "monitoring.prometheusRule.rules.MPIJobStuckPending.severity": "info",
              "monitoring.prometheusRule.rules.MPIJobStuckPending.labels.team": "hpc",
              "monitoring.prometheusRule.rules.MPIJobWebhookFailOpen.labels.severity": "critical",
              "monitoring.prometheusRule.rules.MPIOperatorReconcilerRestarting.for": "15m",
              "monitoring.prometheusRule.rules.MPIOperatorReconcilerRestarting.severity": "critical"}
    spec = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    (group,) = spec["groups"]
    group["rules"] = [rule for rule in group["rules"] if rule["alert"] != "MPIJobWebhookSlow"]
    for rule in group["rules"]:
        anchor = rule["alert"].lower()
        assert rule["annotations"]["runbook_url"] == f"docs/operator-guide.md#{anchor}"
        rule["annotations"]["runbook_url"] = f"https://git.example.com/o/r/blob/v1/docs/operator-guide.md#{anchor}"
        if rule["alert"] == "MPIJobStuckPending":
            rule.update({"for": "2h", "labels": {"severity": "info", "team": "hpc"}})
        if rule["alert"] == "MPIJobWebhookFailOpen":
            rule["labels"] = {"severity": "critical"}
        if rule["alert"] == "MPIOperatorReconcilerRestarting":
            rule.update({"for": "15m", "labels": {"severity": "critical"}})
    assert len(group["rules"]) == 12
    assert added(values) == {RULE: {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator", "labels": PART_OF}, "spec": spec}}


def test_an_override_of_an_unknown_alert_fails_with_the_alerts_names() -> None:
    with pytest.raises(HelmError, match=r"monitoring\.prometheusRule\.rules\.MPIJobStuck: no such alert \(the "
                                        r"alerts: MPIJobStuckPending, MPIOperatorNoLeader, "):
        template(*value_flags({"monitoring.prometheusRule.enabled": "true",
                               "monitoring.prometheusRule.rules.MPIJobStuck.disabled": "true"}))


def dashboard_config_map(namespace: str = "mpi-operator", labels: dict[str, str] | None = None,
                         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "mpi-operator-grafana-dashboard", "namespace": namespace,
                                "labels": {**PART_OF, **(labels or {}), "grafana_dashboard": "1"}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {"mpi-operator.json": DASHBOARD.read_text(encoding="utf-8")}}  # the file, byte for byte


def test_the_dashboard_config_map_for_grafanas_sidecar() -> None:
    assert added({"monitoring.grafanaDashboard.enabled": "true"}) == {DASHBOARD_CONFIG_MAP: dashboard_config_map()}


def test_the_dashboard_config_map_in_grafanas_namespace_with_labels_and_a_folder() -> None:
    values = {"monitoring.grafanaDashboard.enabled": "true", "monitoring.grafanaDashboard.namespace": "monitoring",
              "monitoring.grafanaDashboard.labels.release": "kps",
              "monitoring.grafanaDashboard.annotations.grafana_folder": "MPI"}
    assert added(values) == {("ConfigMap", "monitoring", "mpi-operator-grafana-dashboard"): dashboard_config_map(
        "monitoring", {"release": "kps"}, {"grafana_folder": "MPI"})}


def test_the_charts_copy_of_the_dashboard_is_deploys() -> None:
    copy = CHART / "files" / "grafana-dashboard.json"
    assert copy.read_text(encoding="utf-8") == DASHBOARD.read_text(encoding="utf-8")
    assert gen_chart.expected()[copy] == copy.read_text(encoding="utf-8")
