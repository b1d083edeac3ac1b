"""Prometheus scrapes the deployed operator as a user runs it, and the dashboard and the alerts see the data.

Debian trixie's Prometheus (2.53, the `prometheus` package; bookworm's 2.42 is built without Kubernetes service
discovery) runs as a pod on the real node, from the image hack/build/build-images.sh makes of that package
(`make node-images`), under the ServiceAccount and the one Role of deploy/monitoring/prometheus-rbac.yaml. Its
prometheus.yml is a scrape interval, deploy/monitoring/prometheus-rules.yaml as its rule file and
deploy/monitoring/prometheus-scrape.yaml appended verbatim (in-cluster Kubernetes SD, role endpointslice); the
webhook's CA (the caBundle of its configurations) is where that file names it, /etc/prometheus/mpijob-webhook-ca.crt.
The reconciler is scraped through deploy/monitoring/reconciler-metrics-service.yaml, the webhook through its own
Service's https port.

After an MPIJob has run to Succeeded, Prometheus's HTTP API (the pod's IP, reached from the host over the node's
bridge) shows: exactly the operator's pods up as targets of the two jobs; every alert rule loaded and evaluated
without error; every metric an alert names with series, and each alert's expression without its threshold returning
data; every dashboard panel's query (Grafana's interval variables filled in) returning data. A renamed metric, a
label the rules filter on that is no longer exported, or a Service whose name or port the scrape config no longer
matches, fails here.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import CPU_LIMIT
from hack.devcluster.operator_deploy import NAMESPACE as OPERATOR_NAMESPACE
from hack.devcluster.operator_deploy import RECONCILER, WEBHOOK, webhook_ca_bundle
from hack.devcluster.processes import http_get
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.wait import HarnessError, wait_for
from tests.e2e.jobs import run_to_success
from tests.monitoring import (
    CONDITIONAL_METRICS,
    MONITORING,
    RULES,
    SCRAPE,
    alerts,
    dashboard_panels,
    grafana_query,
    metric_names,
    rules,
    without_threshold,
)

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_NAMESPACE = "monitoring"  # the namespace deploy/monitoring/prometheus-rbac.yaml binds
PROMETHEUS_IMAGE = "mpijob-operator/prometheus:trixie"  # hack/build/build-images.sh prometheus
CONFIG_DIR = "/etc/prometheus"
CA_FILE = "mpijob-webhook-ca.crt"
SCRAPE_INTERVAL = "5s"
# the job names of deploy/monitoring/prometheus-scrape.yaml and the pods (by app.kubernetes.io/name) each scrapes
JOBS = {"mpi-operator-reconciler": RECONCILER, "mpi-operator-webhook": WEBHOOK}
RESTRICTED: dict[str, Any] = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                              "capabilities": {"drop": ["ALL"]}}


def prometheus_yml() -> str:
    """A scrape and rule-evaluation interval, the rule file, then the shipped scrape configs as they are."""
    return (f"global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  evaluation_interval: {SCRAPE_INTERVAL}\n"
            f"rule_files:\n  - {CONFIG_DIR}/{RULES.name}\n" + SCRAPE.read_text(encoding="utf-8"))


def prometheus_objects(ca_pem: str) -> list[dict[str, Any]]:
    """The ConfigMap (prometheus.yml, the rules, the webhook's CA) and a one-replica Deployment of Prometheus
    as the ServiceAccount of prometheus-rbac.yaml, its TSDB in an emptyDir; restricted pod security."""
    labels = {"app.kubernetes.io/name": "prometheus"}
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "prometheus", "namespace": PROMETHEUS_NAMESPACE},
              "data": {"prometheus.yml": prometheus_yml(), RULES.name: RULES.read_text(encoding="utf-8"),
                       CA_FILE: ca_pem}}
    container = {
        "name": "prometheus", "image": PROMETHEUS_IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": [f"--config.file={CONFIG_DIR}/prometheus.yml", "--storage.tsdb.path=/prometheus",
                 "--web.listen-address=:9090"],
        "ports": [{"name": "web", "containerPort": 9090}],
        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "web"}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": RESTRICTED,
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR}, {"name": "data", "mountPath": "/prometheus"}]}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "prometheus", "namespace": PROMETHEUS_NAMESPACE, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"serviceAccountName": "prometheus", "containers": [container],
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                         "fsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                     "volumes": [{"name": "config", "configMap": {"name": "prometheus"}},
                                 {"name": "data", "emptyDir": {}}]}}}}
    return [config, deployment]


def apply(cluster: LocalCluster, *paths_or_objects: Path | dict[str, Any]) -> None:
    for item in paths_or_objects:
        text = item.read_text(encoding="utf-8") if isinstance(item, Path) else yaml.safe_dump(item)
        result = cluster.kubectl("apply", "--server-side", "-f", "-", input=text)
        assert result.returncode == 0, result.stderr


class Prometheus:
    """Prometheus's HTTP API at the pod's address."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        status, body = http_get(f"{self.url}{path}{query}", timeout=10)
        answer = json.loads(body)
        assert status == 200, (path, params, status, answer)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) EXPR evaluates to now."""
        data = self.get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The active targets by (job, pod)."""
        active = self.get("/api/v1/targets", state="active")["activeTargets"]
        return {(t["labels"].get("job", ""), t["labels"].get("pod", "")): t for t in active}


def running_pods(cluster: LocalCluster, name: str) -> set[str]:
    pods = cluster.rest.get(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={name}")
    return {p["metadata"]["name"] for p in pods["items"]
            if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def prometheus_pod(cluster: LocalCluster) -> dict[str, Any] | None:
    pods = cluster.rest.get(f"/api/v1/namespaces/{PROMETHEUS_NAMESPACE}/pods?labelSelector=app.kubernetes.io/name="
                            "prometheus")["items"]
    ready = [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in p.get("status", {}).get("conditions", []))]
    return ready[0] if ready else None


def remove(cluster: LocalCluster) -> None:
    cluster.kubectl("delete", "namespace", PROMETHEUS_NAMESPACE, "--ignore-not-found", "--wait=true", timeout=120)
    for path in (MONITORING / "prometheus-rbac.yaml", MONITORING / "reconciler-metrics-service.yaml"):
        cluster.kubectl("delete", "-f", str(path), "--ignore-not-found")


@pytest.fixture(scope="module")
def prometheus(real_cluster: RealNodeCluster) -> Iterator[Prometheus]:
    """The reconciler's metrics Service, the RBAC example and Prometheus, deployed as the docstring says; all
    removed afterwards."""
    ca_pem = base64.b64decode(webhook_ca_bundle(real_cluster)).decode()
    real_cluster.kubectl("create", "namespace", PROMETHEUS_NAMESPACE, check=True)
    try:
        apply(real_cluster, MONITORING / "reconciler-metrics-service.yaml", MONITORING / "prometheus-rbac.yaml",
              *prometheus_objects(ca_pem))
        try:
            wait_for(lambda: prometheus_pod(real_cluster) is not None, 120, 0.5, what="the Prometheus pod Ready")
        except HarnessError as err:
            raise HarnessError(f"{err}\n" + real_cluster.kubectl(
                "-n", PROMETHEUS_NAMESPACE, "get", "pods,events", "-o", "wide").stdout + real_cluster.kubectl(
                "-n", PROMETHEUS_NAMESPACE, "logs", "deployment/prometheus", "--tail=40").stdout) from None
        pod = prometheus_pod(real_cluster)
        assert pod is not None
        yield Prometheus(f"http://{pod['status']['podIP']}:9090")
    finally:
        remove(real_cluster)


def wait_targets_up(cluster: LocalCluster, prometheus: Prometheus, timeout: float = 120) -> None:
    """Until the active targets are exactly the running pods of the reconciler and the webhook, each under its
    job and up; fails with what Prometheus reports (health, lastError) otherwise."""
    seen: dict[str, Any] = {}

    def up() -> bool:
        expected = {(job, pod) for job, name in JOBS.items() for pod in running_pods(cluster, name)}
        targets = prometheus.targets()
        seen.update(expected=expected, targets={k: (t["health"], t.get("lastError", "")) for k, t in targets.items()})
        return set(targets) == expected and all(t["health"] == "up" for t in targets.values())

    try:
        wait_for(up, timeout, 1.0, what="Prometheus scraping every reconciler and webhook pod")
    except HarnessError:
        pytest.fail(f"targets: expected {sorted(seen.get('expected', []))} all up, Prometheus has "
                    f"{seen.get('targets')}\n" + cluster.kubectl(
                        "-n", PROMETHEUS_NAMESPACE, "logs", "deployment/prometheus", "--tail=30").stdout)


def pi_job() -> dict[str, Any]:
    """examples/pi-openmpi.yaml, with the CPU limits the real node fits."""
    job: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "pi-openmpi.yaml").read_text(encoding="utf-8"))
    job["metadata"]["name"] = "pi"
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["resources"]["limits"]["cpu"] = CPU_LIMIT
    return job


def evaluated_at(rule: dict[str, Any]) -> float:
    """A rule's lastEvaluation (RFC 3339, nanoseconds, UTC) as Unix time, to the second."""
    stamp = str(rule.get("lastEvaluation") or "0001-01-01T00:00:00")[:19]
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()


def sample(result: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['metric'] or ''}={r['value'][1]}" for r in result[:3]) + (" ..." if len(result) > 3 else "")


def test_prometheus_scrapes_the_operator_and_the_dashboard_and_alerts_see_a_job(
        real_cluster: RealNodeCluster, prometheus: Prometheus, namespace: str) -> None:
    began = time.monotonic()
    wait_targets_up(real_cluster, prometheus)
    targets = prometheus.targets()
    print(f"\nPrometheus: every target up {time.monotonic() - began:.1f}s after its pod was Ready: "
          f"{sorted(targets)}", file=sys.stderr)
    scraped = {t["scrapeUrl"].split("/")[0] for t in targets.values()}
    assert scraped == {"http:", "https:"}, scraped  # the webhook over TLS, checked against its CA and name
    # it did so with no more than prometheus-rbac.yaml grants: list/watch in mpi-operator, nothing else
    account = f"--as=system:serviceaccount:{PROMETHEUS_NAMESPACE}:prometheus"
    for verb, resource, where, allowed in [("watch", "endpointslices.discovery.k8s.io", "-n=mpi-operator", "yes"),
                                           ("list", "pods", "-n=mpi-operator", "yes"),
                                           ("get", "secrets", "-n=mpi-operator", "no"),
                                           ("list", "endpoints", "-n=mpi-operator", "no"),
                                           ("list", "pods", "--all-namespaces", "no"),
                                           ("list", "endpointslices.discovery.k8s.io", "-n=default", "no")]:
        answer = real_cluster.kubectl("auth", "can-i", verb, resource, where, account).stdout.strip()
        assert answer == allowed, (verb, resource, where, answer)

    run_to_success(real_cluster, namespace, pi_job())
    # the job's success scraped from the leader, and its launch seen by the webhook, before anything is asked
    wait_for(lambda: bool(prometheus.query("sum(mpi_operator_jobs_successful_total) >= 1")), 60, 1.0,
             what="Prometheus scraping the job's success")
    wait_for(lambda: bool(prometheus.query('sum(mpi_operator_job_duration_seconds_count{outcome="succeeded"}) >= 1'
                                           ' and sum(mpijob_webhook_requests_total{operation="validate"}) >= 1')),
             60, 1.0, what="Prometheus scraping the job's duration and the webhook's requests")
    wait_targets_up(real_cluster, prometheus)
    report: list[str] = []

    # the alert rules: loaded, evaluated without error (twice at least: lastEvaluation after the job)
    after = time.time()
    groups: dict[str, Any] = {}

    def evaluated() -> bool:
        groups["rules"] = [r for g in prometheus.get("/api/v1/rules")["groups"] for r in g["rules"]]
        return all(evaluated_at(r) >= after - 1 for r in groups["rules"])

    wait_for(evaluated, 60, 1.0, what="every rule evaluated after the job")
    loaded = {r["name"]: (r["health"], r.get("lastError", "")) for r in groups["rules"]}
    assert loaded == {rule["alert"]: ("ok", "") for rule in rules()}, loaded

    failures = []
    for name, expr in alerts().items():
        if metric_names(expr) & CONDITIONAL_METRICS.keys():
            skipped = sorted(metric_names(expr) & CONDITIONAL_METRICS.keys())
            report.append(f"alert {name}: not checked ({', '.join(CONDITIONAL_METRICS[m] for m in skipped)})")
            continue
        for metric in sorted(metric_names(expr)):
            if not prometheus.query(metric):
                failures.append(f"alert {name}: no series of {metric}")
        compared = without_threshold(expr)
        result = prometheus.query(compared)
        report.append(f"alert {name}: {compared} -> {sample(result)}")
        if not result:
            failures.append(f"alert {name}: no data from {compared}")

    # the dashboard: every panel's every query
    for title, exprs in dashboard_panels().items():
        for expr in exprs:
            if metric_names(expr) & CONDITIONAL_METRICS.keys():
                continue
            query = grafana_query(expr)
            result = prometheus.query(query)
            report.append(f"panel {title!r}: {query} -> {sample(result)}")
            if not result:
                failures.append(f"panel {title!r}: no data from {query}")
    print("\n" + "\n".join(report), file=sys.stderr)
    assert failures == []

    # and the figures the job made are there: created, succeeded, started (both stages) and timed
    for expr in ("sum(mpi_operator_jobs_created_total) >= 1", "sum(mpi_operator_jobs_successful_total) >= 1",
                 'sum(mpi_operator_job_start_latency_seconds_count{stage="workers_ready"}) >= 1',
                 'sum(mpi_operator_job_start_latency_seconds_count{stage="launcher_running"}) >= 1',
                 "max(mpi_operator_is_leader) == 1",
                 'sum(mpijob_webhook_requests_total{operation="mutate"}) >= 1'):
        assert prometheus.query(expr), expr
