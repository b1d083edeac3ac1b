"""``python -m reconciler render --as jobset|trainjob``: upstream's pi examples (or the project's copies) exported
to JobSet and Kubeflow Trainer, compared whole with the objects expected, what cannot be expressed, the refusals."""

from __future__ import annotations

import base64
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.mpijob.builders import SSHKeyPair
from reconciler.render import RenderError
from reconciler.render_jobset import export_jobset
from reconciler.render_trainjob import export_trainjob
from tests.reference import load_example, pi_example

REPO_ROOT = Path(__file__).resolve().parents[2]
KEYS = SSHKeyPair(b"private key\n", b"public key\n")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
MOUNT = "/home/mpiuser/.ssh"
SSH_ITEMS = [{"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
             {"key": "ssh-publickey", "path": "authorized_keys"}]
NVIDIA = [{"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}]
LAUNCHER_ENV = {
    "OpenMPI": [
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
        {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "false"},
        {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "PRTE_MCA_plm_ssh_args", "value": "-o ConnectionAttempts\t10"},
        {"name": "PRTE_MCA_prte_set_default_slots", "value": "1"},
    ],
    "Intel": [
        {"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
        {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
        {"name": "I_MPI_PERHOST", "value": "1"},
    ],
    "MPICH": [
        {"name": "HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
        {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
        {"name": "HYDRA_LAUNCHER_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
    ],
}
PI_FILES = {"OpenMPI": "pi.yaml", "Intel": "pi-intel.yaml", "MPICH": "pi-mpich.yaml"}


def render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", "render", *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60, check=False)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def template_of(document: dict[str, Any], replica: str) -> dict[str, Any]:
    template: dict[str, Any] = copy.deepcopy(document["spec"]["mpiReplicaSpecs"][replica]["template"])
    return template


def ssh_volume(name: str) -> dict[str, Any]:
    return {"name": "ssh-auth", "secret": {"secretName": f"{name}-ssh", "items": copy.deepcopy(SSH_ITEMS)}}


def expected_worker_job(document: dict[str, Any], name: str) -> dict[str, Any]:
    template = template_of(document, "Worker")
    container = template["spec"]["containers"][0]
    container["env"] = [{"name": "K_MPI_JOB_ROLE", "value": "worker"}]
    container["volumeMounts"] = [{"name": "ssh-auth", "mountPath": MOUNT}]
    template["spec"].update(dnsConfig={"searches": [f"{name}.default.svc.cluster.local"]}, restartPolicy="Never",
                            volumes=[ssh_volume(name)])
    template["metadata"] = {"labels": {"training.kubeflow.org/job-name": name,
                                       "training.kubeflow.org/job-role": "worker"}}
    return {"parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": template}


def expected_launcher_job(document: dict[str, Any], name: str, implementation: str) -> dict[str, Any]:
    template = template_of(document, "Launcher")
    container = template["spec"]["containers"][0]
    container["env"] = [{"name": "K_MPI_JOB_ROLE", "value": "launcher"}, *LAUNCHER_ENV[implementation], *NVIDIA]
    container["volumeMounts"] = [{"name": "ssh-auth", "mountPath": MOUNT},
                                 {"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
    config = {"name": "mpi-job-config", "configMap": {"name": f"{name}-config", "items": [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]}}
    template["spec"].update(restartPolicy="OnFailure", volumes=[ssh_volume(name), config])
    template["metadata"] = {"labels": {"training.kubeflow.org/job-name": name,
                                       "training.kubeflow.org/job-role": "launcher"}}
    return {"parallelism": 1, "completions": 1, "completionMode": "Indexed", "podReplacementPolicy": "Failed",
            "template": template}


def expected_jobset_objects(document: dict[str, Any], implementation: str) -> list[dict[str, Any]]:
    name = document["metadata"]["name"]
    hosts = [f"{name}-worker-0-0.{name}", f"{name}-worker-0-1.{name}"]
    line_end = " slots=1\n" if implementation == "OpenMPI" else ":1\n"
    meta = {"namespace": "default", "labels": {JOBSET_LABEL: name}}
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
        "replicatedJobs": [
            {"name": "worker", "replicas": 1, "template": {"spec": expected_worker_job(document, name)}},
            {"name": "launcher", "replicas": 1, "dependsOn": [{"name": "worker", "status": "Ready"}],
             "template": {"spec": expected_launcher_job(document, name, implementation)}},
        ],
        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
        "failurePolicy": {"maxRestarts": 0},
    }
    ttl = document["spec"]["runPolicy"].get("ttlSecondsAfterFinished")
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-ssh", **meta},
         "type": "kubernetes.io/ssh-auth",
         "data": {"ssh-privatekey": b64(b"private key\n"), "ssh-publickey": b64(b"public key\n")}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", **meta},
         "data": {"hostfile": "".join(h + line_end for h in hosts),
                  "discover_hosts.sh": "#!/bin/sh\n" + "".join(f"echo {h}\n" for h in hosts)}},
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
         "metadata": {"name": name, "namespace": "default"}, "spec": spec},
    ]


DISCOVER_NOTE = ("discover_hosts.sh lists every worker from the start, not only the running ones (nothing rewrites "
                 "it under JobSet)")


@pytest.mark.parametrize("implementation", list(PI_FILES))
def test_pi_examples_as_jobsets(implementation: str) -> None:
    document = load_example(pi_example(PI_FILES[implementation]))
    exported = export_jobset(copy.deepcopy(document), KEYS)
    assert exported.objects == expected_jobset_objects(document, implementation)
    assert exported.not_expressed == [DISCOVER_NOTE]
    assert exported.warnings == []


def test_the_command_line_writes_yaml_a_new_key_pair_and_the_notes() -> None:
    path = pi_example("pi.yaml")
    name = load_example(path)["metadata"]["name"]
    result = render("--as", "jobset", str(path))
    assert result.returncode == 0, result.stderr
    objects = list(yaml.safe_load_all(result.stdout))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", f"{name}-ssh"), ("ConfigMap", f"{name}-config"), ("JobSet", name)]
    assert base64.b64decode(objects[0]["data"]["ssh-privatekey"]).startswith(b"-----BEGIN EC PRIVATE KEY-----\n")
    assert base64.b64decode(objects[0]["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    assert result.stderr == f"Not expressed ({name}): {DISCOVER_NOTE}\n"


def test_launcher_as_worker_without_workers_is_one_replicated_job_in_the_hostfile() -> None:
    document = yaml.safe_load((REPO_ROOT / "examples" / "pi-launcher-as-worker.yaml").read_text())
    _, config_map, jobset = export_jobset(document, KEYS).objects
    assert config_map["data"] == {"hostfile": "pi-launcher-as-worker-launcher-0-0.pi-launcher-as-worker slots=2\n",
                                  "discover_hosts.sh": "#!/bin/sh\necho "
                                  "pi-launcher-as-worker-launcher-0-0.pi-launcher-as-worker\n"}
    assert [(r["name"], r.get("dependsOn")) for r in jobset["spec"]["replicatedJobs"]] == [("launcher", None)]
    launcher = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert launcher["metadata"]["labels"] == {"training.kubeflow.org/job-name": "pi-launcher-as-worker",
                                              "training.kubeflow.org/job-role": "launcher"}
    assert [e["name"] for e in launcher["spec"]["containers"][0]["env"]][-1] == "PRTE_MCA_prte_set_default_slots"


V2_JOB = """
apiVersion: kubeflow.org/v2
kind: MPIJob
metadata:
  name: train
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: user-queue}
  annotations: {team: a, kubectl.kubernetes.io/last-applied-configuration: "{}"}
spec:
  runPolicy:
    suspend: true
    managedBy: kueue.x-k8s.io/multikueue
    backoffLimit: 2
    activeDeadlineSeconds: 3600
    schedulingPolicy: {minAvailable: 3}
    failurePolicy:
      maxRestarts: 3
      rules:
      - name: badArguments
        action: FailJob
        onReplicaTypes: [Launcher]
        onExitCodes: {operator: In, values: [2]}
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          containers: [{name: launcher, image: app, command: [mpirun, app]}]
    Worker:
      replicas: 2
      template:
        spec:
          containers: [{name: worker, image: app}]
"""


def test_run_policy_and_what_jobset_cannot_express() -> None:
    exported = export_jobset(yaml.safe_load(V2_JOB), KEYS)
    jobset = exported.objects[-1]
    assert jobset["metadata"] == {"name": "train", "namespace": "team-a",
                                  "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}, "annotations": {"team": "a"}}
    spec = jobset["spec"]
    assert {key: spec[key] for key in ("failurePolicy", "suspend", "managedBy")} == {
        "failurePolicy": {"maxRestarts": 3}, "suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}
    launcher = spec["replicatedJobs"][1]["template"]["spec"]
    assert {key: launcher[key] for key in ("activeDeadlineSeconds", "backoffLimit")} == {
        "activeDeadlineSeconds": 3600, "backoffLimit": 2}
    worker = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert worker["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert exported.not_expressed == [
        "runPolicy.schedulingPolicy: JobSet creates no PodGroup; gang-schedule with Kueue (label "
        "kueue.x-k8s.io/queue-name) instead",
        "runPolicy.failurePolicy.rules: JobSet restarts the whole job after any failed Job, up to maxRestarts, "
        "whatever the exit code or pod condition",
        "runPolicy.cleanPodPolicy None: JobSet deletes the running workers when the launcher ends",
        DISCOVER_NOTE,
    ]


def test_a_name_whose_pod_names_jobset_refuses() -> None:
    document = load_example(pi_example("pi.yaml"))
    document["metadata"]["name"] = "n" * 45  # valid for the MPIJob, but "<name>-launcher-0-0-abcde" has 64 characters
    with pytest.raises(RenderError) as error:
        export_jobset(document, KEYS)
    assert str(error.value) == (f'cannot render MPIJob "{"n" * 45}" as a JobSet: the name {"n" * 45!r} is too long: '
                                "the JobSet's pod names would have 64 characters, more than 63 (shorten it by 1)")


def test_an_invalid_mpijob_is_denied_as_the_webhook_denies_it() -> None:
    result = render("--as", "jobset", str(REPO_ROOT / "examples" / "invalid-launcher-replicas.yaml"))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith('The MPIJob "invalid-launcher-replicas" is invalid: ')


def test_as_takes_no_gang_scheduling() -> None:
    result = render("--as", "jobset", "--gang-scheduling", "volcano", str(pi_example("pi.yaml")))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("python -m reconciler render: error: --as jobset takes neither --explain-topology nor "
                             "--gang-scheduling\n")


def expected_trainer_objects(document: dict[str, Any]) -> list[dict[str, Any]]:
    name = document["metadata"]["name"]
    worker, launcher = template_of(document, "Worker"), template_of(document, "Launcher")
    worker["spec"]["containers"][0].update(name="node", env=[{"name": "K_MPI_JOB_ROLE", "value": "worker"}])
    worker["spec"]["restartPolicy"] = "Never"
    prrte = [env for env in LAUNCHER_ENV["OpenMPI"] if env["name"].startswith("PRTE_")]
    launcher["spec"]["containers"][0].update(name="node", env=[{"name": "K_MPI_JOB_ROLE", "value": "launcher"},
                                                               *prrte, *NVIDIA])
    launcher["spec"]["restartPolicy"] = "OnFailure"
    template: dict[str, Any] = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
        "replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": worker}}},
            {"name": "launcher", "dependsOn": [{"name": "node", "status": "Ready"}],
             "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                          "spec": {"podReplacementPolicy": "Failed", "template": launcher}}},
        ],
    }
    ttl = document["spec"]["runPolicy"].get("ttlSecondsAfterFinished")
    if ttl is not None:
        template["ttlSecondsAfterFinished"] = ttl
    runtime = f"mpijob-default-{name}"
    mpi = {"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": MOUNT, "runLauncherAsNode": False}
    return [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
         "metadata": {"name": runtime},
         "spec": {"mlPolicy": {"numNodes": 2, "mpi": mpi}, "template": {"spec": template}}},
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": {"name": name, "namespace": "default"},
         "spec": {"runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
                  "trainer": {"numNodes": 2, "numProcPerNode": 1}}},
    ]


def test_open_mpi_pi_as_a_trainjob_and_its_runtime() -> None:
    document = load_example(pi_example("pi.yaml"))
    exported = export_trainjob(copy.deepcopy(document))
    assert exported.objects == expected_trainer_objects(document)
    assert exported.not_expressed == [
        "discover_hosts.sh: Trainer writes a hostfile only (Elastic Horovod's host discovery is gone)"]


@pytest.mark.parametrize("implementation", ["Intel", "MPICH"])
def test_trainer_refuses_intel_mpi_and_mpich(implementation: str) -> None:
    path = pi_example(PI_FILES[implementation])
    name = load_example(path)["metadata"]["name"]
    result = render("--as", "trainjob", str(path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f'cannot render MPIJob "{name}" as a TrainJob: Kubeflow Trainer v2.3 runs Open MPI only '
                             f"(mpiImplementation: {implementation}; kubeflow/trainer#1807); --as jobset keeps it\n")


def test_trainer_refuses_a_launcher_as_worker_without_workers_and_counts_it_as_a_node() -> None:
    document = yaml.safe_load((REPO_ROOT / "examples" / "pi-launcher-as-worker.yaml").read_text())
    with pytest.raises(RenderError) as error:
        export_trainjob(copy.deepcopy(document))
    assert str(error.value) == (
        'cannot render MPIJob "pi-launcher-as-worker" as a TrainJob: Trainer always starts at least one node beside '
        "the launcher (runLauncherAsWorker with no workers); --as jobset keeps it")
    document["spec"]["mpiReplicaSpecs"]["Worker"] = copy.deepcopy(document["spec"]["mpiReplicaSpecs"]["Launcher"])
    document["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 2
    runtime, trainjob = export_trainjob(document).objects
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 3, "mpi": {
        "numProcPerNode": 2, "mpiImplementation": "OpenMPI", "sshAuthMountPath": MOUNT, "runLauncherAsNode": True}}
    assert trainjob["spec"]["trainer"] == {"numNodes": 3, "numProcPerNode": 2}


def test_trainjob_keeps_suspend_managed_by_labels_and_the_restart_budget() -> None:
    exported = export_trainjob(yaml.safe_load(V2_JOB))
    runtime, trainjob = exported.objects
    assert trainjob == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "train", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
                     "annotations": {"team": "a"}},
        "spec": {"runtimeRef": {"name": "mpijob-team-a-train", "apiGroup": "trainer.kubeflow.org",
                                "kind": "ClusterTrainingRuntime"},
                 "trainer": {"numNodes": 2, "numProcPerNode": 1}, "suspend": True,
                 "managedBy": "kueue.x-k8s.io/multikueue"}}
    assert runtime["spec"]["template"]["spec"]["failurePolicy"] == {"maxRestarts": 3}
    launcher = runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]
    assert {k: launcher[k] for k in ("activeDeadlineSeconds", "backoffLimit")} == {
        "activeDeadlineSeconds": 3600, "backoffLimit": 2}
    assert exported.not_expressed[:3] == [
        "runPolicy.schedulingPolicy: Trainer creates no PodGroup; gang-schedule with Kueue (label "
        "kueue.x-k8s.io/queue-name) instead",
        "runPolicy.failurePolicy.rules: Trainer restarts the whole job after any failed Job, up to maxRestarts, "
        "whatever the exit code or pod condition",
        "runPolicy.cleanPodPolicy None: Trainer deletes the running workers when the launcher ends",
    ]
