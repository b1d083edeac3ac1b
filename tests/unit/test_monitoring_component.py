"""The kustomize component deploy/monitoring/prometheus-operator, for a Prometheus Operator on kustomize: `kubectl
kustomize` renders exactly the objects the chart adds with monitoring.serviceMonitor, .prometheusRule and
.grafanaDashboard enabled (whole objects compared), it adds them to the operator's kustomization without changing
any other object, a patch adds the label a Prometheus selects by as the operator guide shows, and its files made
from deploy/monitoring (`make chart`) are those sources. Needs helm and kubectl, as tests/unit/test_chart.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.gen import chart as gen_chart
from tests.monitoring import DASHBOARD, MONITORING, RULES
from tests.unit.test_chart import ROOT, Key, by_key, kubectl, kustomize, with_images
from tests.unit.test_chart_monitoring import (
    DASHBOARD_CONFIG_MAP,
    METRICS_SERVICE,
    RECONCILER_MONITOR,
    RULE,
    WEBHOOK_MONITOR,
    added,
)

COMPONENT = "deploy/monitoring/prometheus-operator"
ALL_ON = {"monitoring.serviceMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
          "monitoring.grafanaDashboard.enabled": "true"}
# what docs/operator-guide.md gives kube-prometheus-stack users: its release's label on what it selects by label
RELEASE_PATCH = {"target": {"group": "monitoring.coreos.com"},
                 "patch": "- op: add\n  path: /metadata/labels/release\n  value: kube-prometheus-stack\n"}


def build(tmp_path: Path, kustomization: dict[str, Any]) -> dict[Key, Any]:
    """`kubectl kustomize` of an overlay in TMP_PATH: KUSTOMIZATION, whose `resources` and `components` are paths
    relative to the checkout (kustomize takes relative paths only); the images those of `kustomize`."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    relative = {key: [os.path.relpath(ROOT / path, overlay) for path in kustomization.get(key, [])]
                for key in ("resources", "components")}
    spec = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", **kustomization, **relative}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    proc = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return by_key([with_images(doc) for doc in yaml.safe_load_all(proc.stdout) if doc])


def test_the_component_renders_what_the_chart_adds_with_monitoring_on() -> None:
    component = kustomize(COMPONENT)
    assert sorted(component) == sorted([METRICS_SERVICE, RECONCILER_MONITOR, WEBHOOK_MONITOR, RULE,
                                        DASHBOARD_CONFIG_MAP])
    assert component == added(ALL_ON)


def test_the_component_holds_deploy_monitorings_rules_and_dashboard_unchanged() -> None:
    """The PrometheusRule's spec is the rule file, the ConfigMap's one key the dashboard's JSON byte for byte."""
    component = kustomize(COMPONENT)
    assert component[RULE]["spec"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert component[DASHBOARD_CONFIG_MAP]["data"] == {"mpi-operator.json": DASHBOARD.read_text(encoding="utf-8")}
    json.loads(component[DASHBOARD_CONFIG_MAP]["data"]["mpi-operator.json"])


def test_the_component_adds_its_objects_to_the_operators_and_changes_none(tmp_path: Path) -> None:
    overlay = build(tmp_path, {"resources": ["deploy"], "components": [COMPONENT]})
    assert overlay == {**kustomize("deploy"), **kustomize(COMPONENT)}
    assert len(overlay) == len(kustomize("deploy")) + 5


def test_a_patch_labels_what_the_prometheus_operator_selects(tmp_path: Path) -> None:
    """kube-prometheus-stack selects ServiceMonitors and PrometheusRules by its release's label: one patch by group
    adds it to those three objects and to nothing else."""
    overlay = build(tmp_path, {"resources": ["deploy"], "components": [COMPONENT], "patches": [RELEASE_PATCH]})
    plain = {**kustomize("deploy"), **kustomize(COMPONENT)}
    changed = {key for key in overlay if overlay[key] != plain[key]}
    assert changed == {RECONCILER_MONITOR, WEBHOOK_MONITOR, RULE}
    for key in changed:
        assert overlay[key]["metadata"]["labels"] == {**plain[key]["metadata"]["labels"],
                                                      "release": "kube-prometheus-stack"}


def test_the_components_made_files_are_up_to_date() -> None:
    """kustomize reads no file above the component: `make chart` (hack/gen/chart.py) makes its copies of
    deploy/monitoring, and `--check` (tests/unit/test_chart.py) fails when one is stale."""
    made = gen_chart.component()
    assert sorted(path.name for path in made) == [
        "grafana-dashboard.json", "prometheus-rule.yaml", "reconciler-metrics-service.yaml"]
    assert {path: path.read_text(encoding="utf-8") for path in made} == made
    assert (ROOT / COMPONENT / "grafana-dashboard.json").read_bytes() == DASHBOARD.read_bytes()


def test_a_source_changed_in_deploy_monitoring_is_seen_as_a_stale_component(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = tmp_path / "deploy"
    (deploy / "monitoring").mkdir(parents=True)
    for name in ("grafana-dashboard.json", "reconciler-metrics-service.yaml"):
        (deploy / "monitoring" / name).write_text((MONITORING / name).read_text(encoding="utf-8"), encoding="utf-8")
    (deploy / "monitoring" / "prometheus-rules.yaml").write_text(
        RULES.read_text(encoding="utf-8").replace("> 1800", "> 3600"), encoding="utf-8")
    (deploy / "kustomization.yaml").write_text((ROOT / "deploy" / "kustomization.yaml").read_text(encoding="utf-8"),
                                               encoding="utf-8")
    monkeypatch.setattr(gen_chart, "DEPLOY", deploy)
    monkeypatch.setattr(gen_chart, "COPIES", {})
    monkeypatch.setattr(gen_chart, "VERBATIM", {})
    rule = gen_chart.component()[ROOT / COMPONENT / "prometheus-rule.yaml"]
    assert yaml.safe_load(rule)["spec"]["groups"][0]["rules"][0]["expr"] == \
        "max(mpi_operator_jobs_pending_oldest_age_seconds) > 3600"
    assert gen_chart.main(["--check"]) == 1
