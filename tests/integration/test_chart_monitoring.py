"""The chart's ServiceMonitors and PrometheusRule (values `monitoring.*`) validated by an API server against the
Prometheus Operator's own CRDs: those of github.com/prometheus-operator/prometheus-operator (its
example/prometheus-operator-crd/), fetched from the Go module proxy (`go mod download`, cached in the module cache),
installed on the session's control plane for this module and removed after it. Each rendered object is applied with
`--dry-run=server --validate=strict`: a field the CRD does not know, or a value its schema refuses (a
duration, an enum), fails. Skipped without Go (no module download) or without helm."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster, wait_for
from hack.devcluster.helm import render_chart, value_flags
from hack.devcluster.operator_deploy import HELM_IMAGES

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.85.0"
CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")
CA_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
ALL_ON = {"monitoring.serviceMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
          "monitoring.serviceMonitor.interval": "30s", "monitoring.serviceMonitor.labels.release": "kps",
          "monitoring.prometheusRule.labels.release": "kps",
          # the per-alert overrides and the runbook base URL: what they render is a valid PrometheusRule too
          "monitoring.prometheusRule.runbookBaseURL": "https://git.example.com/o/r/blob/v1/docs/operator-guide.md",
          "monitoring.prometheusRule.rules.MPIJobStuckPending.for": "2h",
          "monitoring.prometheusRule.rules.MPIJobStuckPending.labels.team": "hpc",
          "monitoring.prometheusRule.rules.MPIJobWebhookSlow.disabled": "true"}


def operator_crds() -> list[Path]:
    if shutil.which("go") is None:
        pytest.skip(f"Go is not installed: the Prometheus Operator's CRDs come from the module {MODULE}")
    proc = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"], capture_output=True, text=True,
                          check=False)
    info = json.loads(proc.stdout or "{}")
    assert proc.returncode == 0, info.get("Error") or proc.stderr
    return [Path(info["Dir"]) / "example" / "prometheus-operator-crd" / name for name in CRDS]


@pytest.fixture(scope="module")
def monitoring_crds(cluster: LocalCluster) -> Iterator[None]:
    paths = operator_crds()
    for path in paths:
        result = cluster.kubectl("apply", "--server-side", "-f", str(path), timeout=120)
        assert result.returncode == 0, result.stderr
    names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in paths]

    def established() -> bool:
        for name in names:
            crd = cluster.rest.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            if not any(c["type"] == "Established" and c["status"] == "True"
                       for c in crd.get("status", {}).get("conditions", [])):
                return False
        return True

    wait_for(established, 60, 0.5, what="the Prometheus Operator's CRDs established")
    try:
        yield
    finally:
        for name in names:
            cluster.kubectl("delete", "customresourcedefinition", name, "--ignore-not-found", "--wait=false")


def dry_run(cluster: LocalCluster, obj: dict[str, Any], namespace: str) -> subprocess.CompletedProcess[str]:
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    return cluster.kubectl("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-",
                           input=yaml.safe_dump(obj))


@pytest.mark.usefixtures("monitoring_crds")
@pytest.mark.parametrize("certificates", [{}, {"certificates.mode": "manual",
                                               "certificates.manual.caBundle": CA_BUNDLE}],
                         ids=["cert-manager", "manual"])
def test_the_api_server_accepts_the_charts_monitoring_objects(
        cluster: LocalCluster, namespace: str, helm_binary: Path, certificates: dict[str, str]) -> None:
    objects = [o for o in render_chart(helm_binary, value_flags({**HELM_IMAGES, **ALL_ON, **certificates}))
               if o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("PrometheusRule", "mpi-operator"), ("ServiceMonitor", "mpi-operator-reconciler"),
        ("ServiceMonitor", "mpi-operator-webhook")]
    for obj in objects:
        result = dry_run(cluster, obj, namespace)
        assert result.returncode == 0, (obj["kind"], obj["metadata"]["name"], result.stderr)


@pytest.mark.usefixtures("monitoring_crds")
def test_the_crds_refuse_what_they_do_not_know(cluster: LocalCluster, namespace: str, helm_binary: Path) -> None:
    """The control: a misspelt field and a bad duration are refused, so the acceptance above means something."""
    objects = {o["kind"]: o for o in render_chart(helm_binary, value_flags({**HELM_IMAGES, **ALL_ON}))
               if o["apiVersion"].startswith("monitoring.coreos.com/")}
    monitor = json.loads(json.dumps(objects["ServiceMonitor"]))
    monitor["spec"]["endpoints"][0]["tlsconfig"] = monitor["spec"]["endpoints"][0].pop("tlsConfig", {})
    result = dry_run(cluster, monitor, namespace)
    assert result.returncode != 0
    assert ".spec.endpoints[0].tlsconfig: field not declared in schema" in result.stderr, result.stderr
    rule = json.loads(json.dumps(objects["PrometheusRule"]))
    rule["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    result = dry_run(cluster, rule, namespace)
    assert result.returncode != 0
    assert "spec.groups[0].rules[0].for" in result.stderr, result.stderr
