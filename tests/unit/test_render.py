"""``python -m reconciler render``: every example rendered offline, compared whole with a golden file.

Regenerate the golden files after an intended change with ``UPDATE_GOLDEN=1 pytest tests/unit/test_render.py``
and review the diff.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.mpijob.builders import build_worker_job
from reconciler.render import PLACEHOLDER_UID, RenderError, render_job
from reconciler.render import render as render_document
from shared.api import MPIJob, defaulted_dict
from shared.api.conversion import convert
from webhook.admission import validate_request

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent / "golden" / "render"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def render(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", "render", *args], capture_output=True, text=True,
                          input=stdin, cwd=REPO_ROOT, timeout=60, check=False)


def matches_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}: run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_renders_as_its_golden_file(example: Path) -> None:
    result = render(str(example))
    invalid = example.stem.startswith("invalid")
    assert result.returncode == (1 if invalid else 0), result.stderr
    matches_golden(example.stem + (".txt" if invalid else ".yaml"), result.stderr if invalid else result.stdout)


def test_objects_in_creation_order_with_the_job_as_controller() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    objects = render_job(job, cluster_domain="cluster.local", gang=None)
    kinds = [obj["kind"] for obj in objects]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert kinds == ["Service", "ConfigMap", "Secret", *["Pod"] * workers, "Job"]
    for obj in objects:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == PLACEHOLDER_UID
    assert ".svc.cluster.local slots=" in objects[1]["data"]["hostfile"]


def test_render_gives_the_cluster_domain_to_the_workers_search_path() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-intel.yaml").read_text())
    name, namespace = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    default = [o for o in render_job(job, gang=None) if o["kind"] == "Pod"]
    custom = [o for o in render_job(job, cluster_domain="kube.local", gang=None) if o["kind"] == "Pod"]
    assert {s for o in default for s in o["spec"]["dnsConfig"]["searches"]} == {f"{name}.{namespace}.svc.cluster.local"}
    assert {s for o in custom for s in o["spec"]["dnsConfig"]["searches"]} == {f"{name}.{namespace}.svc.kube.local"}


def test_gang_scheduling_adds_the_pod_group_and_json_output() -> None:
    result = render("-o", "json", "--gang-scheduling=volcano", str(REPO_ROOT / "examples" / "pi-openmpi.yaml"))
    assert result.returncode == 0, result.stderr
    items = yaml.safe_load(result.stdout)["items"]
    assert [item["kind"] for item in items][3] == "PodGroup"
    assert items[3]["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert {item["spec"]["template"]["spec"].get("schedulerName") for item in items if item["kind"] == "Job"} == {
        "volcano"}


def test_native_gang_scheduling_prints_the_workload_and_pod_group() -> None:
    example = str(REPO_ROOT / "examples" / "pi-openmpi.yaml")
    result = render("-o", "json", "--gang-scheduling", "kube-scheduler", example)
    assert result.returncode == 0, result.stderr
    items = yaml.safe_load(result.stdout)["items"]
    gang = [item for item in items if item["apiVersion"] == "scheduling.k8s.io/v1alpha2"]
    assert [(item["kind"], item["metadata"]["name"]) for item in gang] == [("Workload", "pi-openmpi"),
                                                                          ("PodGroup", "pi-openmpi")]
    policy = gang[0]["spec"]["podGroupTemplates"][0]["schedulingPolicy"]
    assert gang[1]["spec"] == {"schedulingPolicy": policy, "podGroupTemplateRef": {
        "workload": {"workloadName": "pi-openmpi", "podGroupTemplateName": "mpijob"}}}
    pods = [item["spec"]["template"]["spec"] if item["kind"] == "Job" else item["spec"] for item in items
            if item["kind"] in ("Pod", "Job")]
    assert [pod["schedulingGroup"] for pod in pods] == [{"podGroupName": "pi-openmpi"}] * len(pods)


@pytest.mark.parametrize(("stdin", "message"), [
    pytest.param("kind: Pod\nmetadata: {name: p}\n", "not an MPIJob (kind 'Pod')", id="not an MPIJob"),
    pytest.param("a: [", "python -m reconciler render: error: -: while parsing", id="not YAML"),
    pytest.param("", "python -m reconciler render: error: -: no MPIJob in it", id="empty"),
    pytest.param("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: x}\nspec:\n  slotsPerWorker: two\n"
                 "  mpiReplicaSpecs: {Launcher: {template: {spec: {containers: [{name: c, image: i}]}}}}\n",
                 'The MPIJob "x" is invalid: spec.slotsPerWorker: Invalid value: "two"', id="wrong type"),
])
def test_bad_input_is_one_clear_message(stdin: str, message: str) -> None:
    result = render("-", stdin=stdin)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert result.stdout == ""


def test_a_job_too_large_for_its_config_map_is_refused() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 30000
    result = render("-", stdin=yaml.safe_dump(job))
    assert result.returncode == 1
    assert "would need" in result.stderr
    assert "more than the 1048576 bytes a ConfigMap can hold" in result.stderr


def test_a_job_past_half_its_config_map_is_warned_about_as_the_webhook_does() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    job["metadata"]["namespace"] = "default"
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 5000
    review = {"uid": "u", "operation": "CREATE", "kind": {"group": "kubeflow.org", "version": "v2beta1",
                                                          "kind": "MPIJob"},
              "namespace": "default", "name": job["metadata"]["name"], "object": job}
    warnings = validate_request(review, cluster_domain="cluster.local").response["warnings"]
    assert [w.split(":")[0] for w in warnings] == ["spec.mpiReplicaSpecs[Worker].replicas"]
    assert render_document(job, cluster_domain="cluster.local").warnings == warnings
    assert render_document(job).warnings == []  # shorter host names: under half the limit


POLICY = {"maxRestarts": 3, "rules": [{"name": "disrupted", "action": "RestartJob",
                                       "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def test_a_v2_job_renders_as_its_v2beta1_self_with_the_first_attempt_labelled() -> None:
    v2beta1 = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    v2 = {**v2beta1, "apiVersion": "kubeflow.org/v2",
          "spec": {**v2beta1["spec"], "runPolicy": {**v2beta1["spec"].get("runPolicy", {}), "failurePolicy": POLICY}}}
    labelled = []
    for rendered in render_job(v2beta1):
        obj = copy.deepcopy(rendered)
        if obj["kind"] in ("Pod", "Job"):
            obj["metadata"]["labels"]["mpijobs.kubeflow.org/restart-attempt"] = "0"
        if obj["kind"] == "Job":
            obj["spec"]["template"]["metadata"]["labels"]["mpijobs.kubeflow.org/restart-attempt"] = "0"
        labelled.append(obj)
    assert render_job(v2) == labelled
    stored = convert(v2, "kubeflow.org/v2beta1")  # as the API server stores it: the policy in the annotation
    assert render_job(stored) == labelled


def test_a_v2_job_is_judged_as_the_webhook_judges_it() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    job["apiVersion"] = "kubeflow.org/v2"
    job["spec"].setdefault("runPolicy", {})["failurePolicy"] = {"rules": POLICY["rules"]}
    with pytest.raises(RenderError) as raised:
        render_job(job)
    assert str(raised.value) == ('The MPIJob "pi-openmpi" is invalid: spec.runPolicy.failurePolicy.maxRestarts: '
                                 "Required value: maxRestarts is required with a RestartJob rule")


def with_warnings() -> Any:
    """pi-openmpi with two likely mistakes the webhook allows with a warning each."""
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    worker["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
    worker["template"]["spec"]["restartPolicy"] = "Always"
    job["spec"]["slotsPerWorker"] = 1
    return job


WARNINGS = [
    "spec.slotsPerWorker: 1 slot(s) per worker but each worker requests 2 GPU(s): set slotsPerWorker to 2 to run "
    "one process per GPU",
    "spec.mpiReplicaSpecs[Worker].template.spec.restartPolicy: Always is overridden by the replica restartPolicy "
    "Never",
]


def test_the_webhooks_warnings_go_to_stderr_and_the_objects_to_stdout() -> None:
    job = with_warnings()
    review = {"uid": "u", "operation": "CREATE", "kind": {"group": "kubeflow.org", "version": "v2beta1",
                                                          "kind": "MPIJob"},
              "resource": {"group": "kubeflow.org", "version": "v2beta1", "resource": "mpijobs"},
              "namespace": "default", "name": job["metadata"]["name"], "object": job}
    assert validate_request(review).response["warnings"] == WARNINGS  # the webhook's own, word for word
    result = render("-", stdin=yaml.safe_dump(job))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "".join(f"Warning: {warning}\n" for warning in WARNINGS)
    assert list(yaml.safe_load_all(result.stdout)) == render_job(job)


def test_warnings_come_with_a_denial_too() -> None:
    job = with_warnings()
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    result = render("-", stdin=yaml.safe_dump(job))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "".join(f"Warning: {warning}\n" for warning in WARNINGS) + (
        'The MPIJob "pi-openmpi" is invalid: spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: '
        "must be 1\n")


def test_the_indexed_job_backend_renders_the_worker_job_instead_of_the_worker_pods() -> None:
    """By the job's annotation or v2 field, or by --default-worker-backend for a job that names none: the objects
    are the Pods backend's with the Service labelled with the backend and one worker Job for the worker pods."""
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    pods = render_job(job)
    annotated = copy.deepcopy(job)
    annotated["metadata"]["annotations"] = {"mpijobs.kubeflow.org/worker-backend": "IndexedJob"}
    defaulted = MPIJob.model_validate(defaulted_dict({**annotated, "metadata": {
        **annotated["metadata"], "namespace": "default", "uid": PLACEHOLDER_UID}}))
    service = copy.deepcopy(pods[0])
    service["metadata"]["labels"]["mpijobs.kubeflow.org/worker-backend"] = "IndexedJob"
    expected = [service, pods[1], pods[2], build_worker_job(defaulted), pods[-1]]
    assert render_job(annotated) == expected
    v2 = {**job, "apiVersion": "kubeflow.org/v2", "spec": {**job["spec"], "workerBackend": "IndexedJob"}}
    assert render_job(v2) == expected
    assert render_job(job, default_backend="IndexedJob") == expected
    result = render("--default-worker-backend", "IndexedJob", "-", stdin=yaml.safe_dump(job))
    assert result.returncode == 0, result.stderr
    assert [o["kind"] for o in yaml.safe_load_all(result.stdout)] == ["Service", "ConfigMap", "Secret", "Job", "Job"]


def test_a_template_the_worker_job_cannot_carry_is_refused_when_the_flag_makes_the_job_indexed() -> None:
    job = yaml.safe_load((REPO_ROOT / "examples" / "pi-openmpi.yaml").read_text())
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["subdomain"] = "mine"
    assert [o["kind"] for o in render_job(job)][-1] == "Job"  # upstream accepts it under Pods
    with pytest.raises(RenderError) as raised:
        render_job(job, default_backend="IndexedJob")
    assert str(raised.value) == (
        'The MPIJob "pi-openmpi" is invalid: spec.mpiReplicaSpecs[Worker].template.spec.subdomain: Forbidden: must '
        "not be set with the IndexedJob worker backend: the operator sets it to the job's Service, <job>")
