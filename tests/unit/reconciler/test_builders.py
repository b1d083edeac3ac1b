"""Builders of the Service, Secret, worker Pods and launcher Job: upstream's TestNewLauncherAndWorker
(controller.md 6.1 case 25) as whole objects, plus the run-policy, gang and un-suspend variants.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from reconciler.mpijob.builders import (
    GangScheduling,
    SSHKeyPair,
    build_config_map,
    build_launcher_job,
    build_launcher_pod_template,
    build_pod_group,
    build_service,
    build_ssh_secret,
    build_worker,
    service_spec_patch,
    ssh_secret_data_patch,
    ssh_secret_has_key_pair,
    sync_scheduling_directives,
    template_overrides_restart_policy,
)
from shared.api import MPIJob
from shared.jsondict import JSONDict
from tests.unit.helpers import wire
from tests.unit.reconciler.helpers import make_job, owner_ref, replica, vandalize

OPERATOR = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
ROLE = "training.kubeflow.org/job-role"
INDEX = "training.kubeflow.org/replica-index"
SSH_ITEMS = [
    {"key": "ssh-privatekey", "path": "id_rsa"},
    {"key": "ssh-publickey", "path": "id_rsa.pub"},
    {"key": "ssh-publickey", "path": "authorized_keys"},
]
OPENMPI_ENV = [
    {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
    {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "false"},
    {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "PRTE_MCA_plm_ssh_args", "value": "-o ConnectionAttempts\t10"},
    {"name": "PRTE_MCA_prte_set_default_slots", "value": "1"},
]
NVIDIA_BLANKING = [{"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}]


def ssh_volume(job: str, default_mode: bool = True) -> JSONDict:
    secret: JSONDict = {"secretName": f"{job}-ssh", "items": SSH_ITEMS}
    if default_mode:
        secret["defaultMode"] = 0o600
    return {"name": "ssh-auth", "secret": secret}


def config_volume(job: str) -> JSONDict:
    items = [{"key": "hostfile", "path": "hostfile", "mode": 0o444},
             {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]
    return {"name": "mpi-job-config", "configMap": {"name": f"{job}-config", "items": items}}


def pod_labels(job: str, role: str, **extra: str) -> dict[str, str]:
    return {OPERATOR: "mpi-operator", JOB_NAME: job, ROLE: role, **extra}


def launcher_job(job: str, ns: str, template_labels: dict[str, str], pod_spec: JSONDict, **spec: Any) -> JSONDict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{job}-launcher", "namespace": ns, "labels": {"app": job},
                     "ownerReferences": [owner_ref(job)]},
        "spec": {
            **spec,
            "podReplacementPolicy": "Failed",
            "template": {"metadata": {"labels": template_labels, "ownerReferences": [owner_ref(job)]},
                         "spec": pod_spec},
        },
    }


def worker_pod(job: str, ns: str, index: int, labels: dict[str, str], spec: JSONDict) -> JSONDict:
    name = f"{job}-worker-{index}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner_ref(job)]},
            "spec": spec}


# --- TestNewLauncherAndWorker -------------------------------------------------------------------------

def defaults_case(launcher_as_worker: bool) -> Any:
    job = make_job("foo", "bar", runLauncherAsWorker=launcher_as_worker,
                   mpiReplicaSpecs={"Launcher": replica(), "Worker": replica()})
    index_label = {INDEX: "0"} if launcher_as_worker else {}
    launcher = launcher_job("foo", "bar", pod_labels("foo", "launcher", **index_label), {
        "containers": [{
            "env": OPENMPI_ENV + ([] if launcher_as_worker else NVIDIA_BLANKING),
            "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"},
                             {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
        }],
        "hostname": "foo-launcher",
        "subdomain": "foo",
        "restartPolicy": "OnFailure",
        "volumes": [ssh_volume("foo"), config_volume("foo")],
    })
    worker = worker_pod("foo", "bar", 0, pod_labels("foo", "worker", **{INDEX: "1" if launcher_as_worker else "0"}), {
        "containers": [{
            "command": ["/usr/sbin/sshd", "-De"],
            "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
            "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"}],
        }],
        "hostname": "foo-worker-0",
        "subdomain": "foo",
        "dnsConfig": {"searches": ["foo.bar.svc.cluster.local"]},
        "restartPolicy": "Never",
        "volumes": [ssh_volume("foo")],
    })
    return job, 0, launcher, worker


def overrides_case() -> Any:
    launcher_template = {
        "metadata": {"labels": {"foo": "bar"}},
        "spec": {
            "hostNetwork": True,
            "containers": [
                {"securityContext": {"runAsUser": 1000}, "env": [{"name": "FOO", "value": "bar"}],
                 "volumeMounts": [{"name": "fool-vol", "mountPath": "/mnt/foo"}]},
                {},
            ],
            "volumes": [{"name": "foo-vol"}],
        },
    }
    worker_template = {"spec": {"hostNetwork": True, "containers": [
        {"command": ["/entrypoint.sh"], "env": [{"name": "FOO", "value": "bar"}]}]}}
    job = make_job(
        "bar", "foo", sshAuthMountPath="/home/mpiuser/.ssh", slotsPerWorker=5, mpiImplementation="Intel",
        runPolicy={"ttlSecondsAfterFinished": 1, "activeDeadlineSeconds": 2, "backoffLimit": 3},
        mpiReplicaSpecs={"Launcher": {"restartPolicy": "OnFailure", "template": launcher_template},
                         "Worker": {"template": worker_template}},
    )
    launcher = launcher_job("bar", "foo", {"foo": "bar", **pod_labels("bar", "launcher")}, {
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "hostname": "bar-launcher",
        "subdomain": "bar",
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "securityContext": {"runAsUser": 1000},
                "env": [
                    {"name": "FOO", "value": "bar"},
                    {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
                    {"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
                    {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
                    {"name": "I_MPI_PERHOST", "value": "5"},
                    *NVIDIA_BLANKING,
                ],
                "volumeMounts": [
                    {"name": "fool-vol", "mountPath": "/mnt/foo"},
                    {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
                    {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                ],
            },
            {},
        ],
        "volumes": [{"name": "foo-vol"}, ssh_volume("bar", default_mode=False), config_volume("bar")],
    }, ttlSecondsAfterFinished=1, activeDeadlineSeconds=2, backoffLimit=3)
    worker = worker_pod("bar", "foo", 12, pod_labels("bar", "worker", **{INDEX: "12"}), {
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "hostname": "bar-worker-12",
        "subdomain": "bar",
        "dnsConfig": {"searches": ["bar.foo.svc.cluster.local"]},
        "restartPolicy": "Never",
        "containers": [{
            "command": ["/entrypoint.sh"],
            "env": [{"name": "FOO", "value": "bar"}, {"name": "K_MPI_JOB_ROLE", "value": "worker"}],
            "volumeMounts": [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}],
        }],
        "volumes": [ssh_volume("bar", default_mode=False)],
    })
    return job, 12, launcher, worker


NEW_LAUNCHER_AND_WORKER = [
    pytest.param(*defaults_case(False), id="defaults"),
    pytest.param(*defaults_case(True), id="launcher-as-worker"),
    pytest.param(*overrides_case(), id="overrides"),
]


@pytest.mark.parametrize(("job", "index", "launcher", "worker"), NEW_LAUNCHER_AND_WORKER)
def test_new_launcher_and_worker(job: MPIJob, index: int, launcher: JSONDict, worker: JSONDict) -> None:
    assert build_launcher_job(job) == launcher
    assert build_worker(job, index) == worker


# --- --cluster-domain: the workers' DNS search path (upstream's fix after v0.8.2, kubeflow/mpi-operator#832) ---

def with_search(worker: JSONDict, search: str) -> JSONDict:
    changed: JSONDict = orjson.loads(orjson.dumps(worker))
    changed["spec"]["dnsConfig"] = {"searches": [search]}
    return changed


@pytest.mark.parametrize(("job", "index", "launcher", "worker"), NEW_LAUNCHER_AND_WORKER)
def test_the_default_cluster_domain_changes_nothing(job: MPIJob, index: int, launcher: JSONDict,
                                                    worker: JSONDict) -> None:
    """An empty --cluster-domain (the default) builds v0.8.2's objects: the search path ends in cluster.local."""
    assert build_worker(job, index, cluster_domain="") == worker
    assert build_worker(job, index, cluster_domain="cluster.local") == worker
    assert build_launcher_job(job) == launcher


@pytest.mark.parametrize(("job", "index", "launcher", "worker"), NEW_LAUNCHER_AND_WORKER)
@pytest.mark.parametrize("domain", ["kube.local", "mpi.example.org"])
def test_a_custom_cluster_domain_is_the_workers_search_path(job: MPIJob, index: int, launcher: JSONDict,
                                                             worker: JSONDict, domain: str) -> None:
    """Whole worker Pods: only the search entry differs, ``<job>.<ns>.svc.<domain>``; the launcher gets none."""
    name, namespace = job.name, job.namespace
    assert build_worker(job, index, cluster_domain=domain) == with_search(worker, f"{name}.{namespace}.svc.{domain}")
    assert build_launcher_job(job) == launcher


def test_a_custom_cluster_domain_is_appended_to_the_templates_dns_config() -> None:
    template = {"spec": {"dnsConfig": {"searches": ["example.com"], "options": [{"name": "ndots", "value": "2"}]},
                         "containers": [{}]}}
    job = make_job("j", "ns", mpiReplicaSpecs={"Launcher": replica(), "Worker": {"template": template}})
    pod = build_worker(job, 0, GangScheduling("volcano"), cluster_domain="kube.local")
    assert pod["spec"]["dnsConfig"] == {"searches": ["example.com", "j.ns.svc.kube.local"],
                                        "options": [{"name": "ndots", "value": "2"}]}
    worker = job.replica_spec("Worker")
    assert worker is not None
    assert worker.template is not None
    assert worker.template["spec"]["dnsConfig"]["searches"] == ["example.com"], "job untouched"


# --- Launcher Job run policy, suspend, restart policy ---------------------------------------------------

@pytest.mark.parametrize(("run_policy", "expected"), [
    pytest.param({}, {}, id="nothing set"),
    pytest.param({"suspend": True}, {"suspend": True}, id="suspended"),
    pytest.param({"suspend": False}, {}, id="not suspended: suspend left out"),
    pytest.param({"backoffLimit": 0}, {"backoffLimit": 0}, id="zero backoff limit kept"),
    pytest.param({"ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 600, "suspend": True},
                 {"ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 600, "suspend": True}, id="all"),
])
def test_launcher_job_run_policy(run_policy: JSONDict, expected: JSONDict) -> None:
    job = make_job(runPolicy=run_policy, mpiReplicaSpecs={"Launcher": replica()})
    spec = build_launcher_job(job)["spec"]
    spec.pop("template")
    assert spec == {"podReplacementPolicy": "Failed", **expected}


@pytest.mark.parametrize(("implementation", "expected"), [
    pytest.param("MPICH", [{"name": "HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
                           {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
                           {"name": "HYDRA_LAUNCHER_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"}], id="MPICH"),
    pytest.param("Intel", [{"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
                           {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
                           {"name": "I_MPI_PERHOST", "value": "3"}], id="Intel"),
    pytest.param("OpenMPI", [*OPENMPI_ENV[1:4], {"name": "OMPI_MCA_orte_set_default_slots", "value": "3"},
                             *OPENMPI_ENV[5:8], {"name": "PRTE_MCA_prte_set_default_slots", "value": "3"}],
                 id="OpenMPI"),
])
def test_launcher_env_per_implementation(implementation: str, expected: list[JSONDict]) -> None:
    job = make_job(mpiImplementation=implementation, slotsPerWorker=3, mpiReplicaSpecs={"Launcher": replica()})
    env = build_launcher_pod_template(job)["spec"]["containers"][0]["env"]
    assert env == [{"name": "K_MPI_JOB_ROLE", "value": "launcher"}, *expected, *NVIDIA_BLANKING]


@pytest.mark.parametrize(("template_policy", "replica_policy", "overrides", "expected"), [
    pytest.param(None, None, False, "OnFailure", id="default"),
    pytest.param("Always", None, True, "OnFailure", id="template policy overridden"),
    pytest.param("Never", "Never", True, "Never", id="replica policy wins"),
    pytest.param(None, "ExitCode", False, "Never", id="ExitCode means Never"),
])
def test_launcher_restart_policy(template_policy: str | None, replica_policy: str | None, overrides: bool,
                                 expected: str) -> None:
    pod_spec: JSONDict = {"containers": [{}], **({"restartPolicy": template_policy} if template_policy else {})}
    launcher = replica(pod_spec, restartPolicy=replica_policy) if replica_policy else replica(pod_spec)
    job = make_job(mpiReplicaSpecs={"Launcher": launcher})
    assert template_overrides_restart_policy(job) is overrides
    assert build_launcher_pod_template(job)["spec"]["restartPolicy"] == expected


def test_launcher_template_keeps_annotations_and_drops_other_metadata() -> None:
    template = {"metadata": {"name": "ignored", "annotations": {"a": "b"}, "labels": {OPERATOR: "user"}},
                "spec": {"containers": [{"command": ["mpirun"]}]}}
    job = make_job(mpiReplicaSpecs={"Launcher": {"template": template}})
    built = build_launcher_pod_template(job)
    assert built["metadata"] == {"labels": pod_labels("foo", "launcher"), "annotations": {"a": "b"},
                                 "ownerReferences": [owner_ref("foo")]}
    assert built["spec"]["containers"][0]["command"] == ["mpirun"]  # no default command for the launcher
    assert "dnsConfig" not in built["spec"]


# --- Worker details -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("container", "expected_command", "expected_args"), [
    pytest.param({}, ["/usr/sbin/sshd", "-De"], None, id="default command"),
    pytest.param({"command": [], "args": []}, ["/usr/sbin/sshd", "-De"], [], id="empty lists count as unset"),
    pytest.param({"args": ["/usr/sbin/sshd", "-De"]}, None, ["/usr/sbin/sshd", "-De"], id="args only"),
    pytest.param({"command": ["sshd"]}, ["sshd"], None, id="own command"),
])
def test_worker_command(container: JSONDict, expected_command: list[str] | None,
                        expected_args: list[str] | None) -> None:
    job = make_job(mpiReplicaSpecs={"Launcher": replica(), "Worker": replica({"containers": [container]})})
    built = build_worker(job, 0)["spec"]["containers"][0]
    assert built.get("command") == expected_command
    assert built.get("args") == expected_args


def test_worker_keeps_template_metadata_and_dns_config() -> None:
    template = {
        "metadata": {"labels": {"team": "a", ROLE: "user"}, "annotations": {"note": "x"}},
        "spec": {"restartPolicy": "Always", "dnsConfig": {"searches": ["example.com"], "options": [{"name": "ndots"}]},
                 "containers": [{}, {"name": "sidecar"}], "volumes": [{"name": "data"}]},
    }
    job = make_job("j", "ns", mpiReplicaSpecs={"Launcher": replica(), "Worker": {"template": template,
                                                                                    "restartPolicy": "OnFailure"}})
    pod = build_worker(job, 3)
    assert pod["metadata"]["labels"] == {"team": "a", **pod_labels("j", "worker", **{INDEX: "3"})}
    assert pod["metadata"]["annotations"] == {"note": "x"}
    assert pod["spec"]["dnsConfig"] == {"searches": ["example.com", "j.ns.svc.cluster.local"],
                                        "options": [{"name": "ndots"}]}
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert pod["spec"]["containers"][1] == {"name": "sidecar"}
    assert pod["spec"]["volumes"] == [{"name": "data"}, ssh_volume("j")]


# --- Gang scheduling decoration ----------------------------------------------------------------------------

@pytest.mark.parametrize(("gang", "label", "annotation"), [
    pytest.param(GangScheduling("volcano"), {}, {"scheduling.k8s.io/group-name": "foo"}, id="volcano"),
    pytest.param(GangScheduling("scheduler-plugins-scheduler"), {"scheduling.x-k8s.io/pod-group": "foo"}, {},
                 id="scheduler-plugins"),
])
def test_gang_decoration(gang: GangScheduling, label: dict[str, str], annotation: dict[str, str]) -> None:
    worker_spec = {"schedulerName": "other", "containers": [{}]}
    job = make_job(runLauncherAsWorker=True, mpiReplicaSpecs={"Launcher": replica(), "Worker": replica(worker_spec)})
    worker = build_worker(job, 0, gang)
    assert worker["spec"]["schedulerName"] == gang.scheduler_name
    assert worker["metadata"]["labels"] == pod_labels("foo", "worker", **{INDEX: "1"}, **label)
    assert worker["metadata"].get("annotations", {}) == annotation
    template = build_launcher_job(job, gang)["spec"]["template"]
    assert template["spec"]["schedulerName"] == gang.scheduler_name
    assert template["metadata"]["labels"] == pod_labels("foo", "launcher", **{INDEX: "0"}, **label)
    assert template["metadata"].get("annotations", {}) == annotation


# --- Un-suspend: scheduling directives ----------------------------------------------------------------------

def test_sync_scheduling_directives() -> None:
    existing = {
        "metadata": {"name": "foo-launcher", "resourceVersion": "7"},
        "spec": {"suspend": True, "backoffLimit": 6, "template": {
            "metadata": {"labels": {"foo": "old", "kept": "yes"}, "annotations": {"a": "1"}},
            "spec": {"nodeSelector": {"old": "x"}, "tolerations": [{"key": "old"}], "containers": [{"name": "c"}]},
        }},
        "status": {"startTime": "2024-01-01T00:00:00Z"},
    }
    desired: JSONDict = {
        "metadata": {"labels": {"foo": "bar"}, "annotations": {"kueue.x-k8s.io/workload": "my-workload"}},
        "spec": {"nodeSelector": {"foo": "bar"},
                 "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                 "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}], "containers": [{"name": "other"}]},
    }
    before = (repr(existing), repr(desired))
    updated = sync_scheduling_directives(existing, desired)
    assert repr(existing) == before[0]
    assert repr(desired) == before[1]
    assert updated == {
        "metadata": {"name": "foo-launcher", "resourceVersion": "7"},
        "spec": {"suspend": False, "backoffLimit": 6, "template": {
            "metadata": {"labels": {"foo": "bar", "kept": "yes"},
                         "annotations": {"a": "1", "kueue.x-k8s.io/workload": "my-workload"}},
            "spec": {"nodeSelector": {"foo": "bar"}, "tolerations": desired["spec"]["tolerations"],
                     "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}], "containers": [{"name": "c"}]},
        }},
        "status": {"startTime": "2024-01-01T00:00:00Z"},
    }
    vandalize(updated)
    assert repr(desired) == before[1]


def test_sync_scheduling_directives_removes_unset_directives() -> None:
    existing = {"spec": {"suspend": True, "template": {"spec": {"nodeSelector": {"a": "b"}, "containers": [{}]}}}}
    updated = sync_scheduling_directives(existing, {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{}]}})
    assert updated == {"spec": {"suspend": False, "template": {"metadata": {"labels": {"x": "y"}},
                                                              "spec": {"containers": [{}]}}}}


# --- Service and Secret -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("launcher_as_worker", "extra"), [
    pytest.param(False, {}, id="workers only"),
    pytest.param(True, {"publishNotReadyAddresses": True}, id="launcher as worker"),
])
def test_service(launcher_as_worker: bool, extra: JSONDict) -> None:
    job = make_job("foo", "bar", runLauncherAsWorker=launcher_as_worker, mpiReplicaSpecs={"Launcher": replica()})
    assert build_service(job) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "foo", "namespace": "bar", "labels": {"app": "foo"},
                     "ownerReferences": [owner_ref("foo")]},
        "spec": {"clusterIP": "None", "selector": {OPERATOR: "mpi-operator", JOB_NAME: "foo"}, **extra},
    }


def test_service_spec_patch_replaces_the_selector() -> None:
    job = make_job(runLauncherAsWorker=True, mpiReplicaSpecs={"Launcher": replica()})
    desired = build_service(job)
    selector = desired["spec"]["selector"]
    assert service_spec_patch(desired, desired) is None
    assert service_spec_patch({"spec": {"selector": selector}}, desired) == {
        "selector": selector, "publishNotReadyAddresses": True}
    assert service_spec_patch({"spec": {"selector": {**selector, "extra": "x"}, "publishNotReadyAddresses": True}},
                              desired) == {"selector": {**selector, "extra": None}, "publishNotReadyAddresses": True}


FIXED_KEYS = SSHKeyPair(private_key_pem=b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n",
                        authorized_key=b"ecdsa-sha2-nistp521 AAAAE2VjZHNh\n")


def test_ssh_secret() -> None:
    secret = build_ssh_secret(make_job("foo", "bar"), FIXED_KEYS)
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "foo-ssh", "namespace": "bar", "labels": {"app": "foo"},
                     "ownerReferences": [owner_ref("foo")]},
        "type": "kubernetes.io/ssh-auth",
        "data": {
            "ssh-privatekey": base64.b64encode(FIXED_KEYS.private_key_pem).decode(),
            "ssh-publickey": base64.b64encode(b"ecdsa-sha2-nistp521 AAAAE2VjZHNh\n").decode(),
        },
    }
    assert "BEGIN" not in repr(FIXED_KEYS)


NEW_PAIR = {"ssh-privatekey": base64.b64encode(FIXED_KEYS.private_key_pem).decode(),
            "ssh-publickey": base64.b64encode(FIXED_KEYS.authorized_key).decode()}


@pytest.mark.parametrize(("data", "has_pair", "patch"), [
    pytest.param({"ssh-privatekey": "x", "ssh-publickey": "y"}, True, None, id="complete"),
    pytest.param({"ssh-privatekey": "x"}, False, NEW_PAIR, id="public key missing"),
    pytest.param({"ssh-privatekey": "x", "ssh-publickey": "y", "extra": "z"}, True, {"extra": None},
                 id="extra key: removed, the pair kept"),
    pytest.param({"ssh-publickey": "y", "extra": "z"}, False, {"extra": None, **NEW_PAIR},
                 id="a key lost and an extra key"),
    pytest.param(None, False, NEW_PAIR, id="no data"),
])
def test_ssh_secret_data_patch(data: JSONDict | None, has_pair: bool, patch: JSONDict | None) -> None:
    assert ssh_secret_has_key_pair({"data": data}) is has_pair
    assert ssh_secret_data_patch({"data": data}, None if has_pair else FIXED_KEYS) == patch


def test_template_without_container_is_refused() -> None:
    job = make_job(mpiReplicaSpecs={"Launcher": replica({"containers": []}), "Worker": {}})
    with pytest.raises(ValueError, match="Launcher template has no container"):
        build_launcher_job(job)
    with pytest.raises(ValueError, match="Worker template has no container"):
        build_worker(job, 0)


# --- Builders never change the job and never share anything with it ----------------------------------------

def every_object(job: MPIJob) -> list[JSONDict]:
    return [
        build_service(job),
        build_config_map(job, "cluster.local", ["foo-worker-0"]),
        build_ssh_secret(job, FIXED_KEYS),
        build_worker(job, 0, GangScheduling("volcano")),
        build_worker(job, 1, GangScheduling("sched")),
        build_launcher_job(job, GangScheduling("volcano")),
        build_launcher_pod_template(job, GangScheduling("sched")),
        build_pod_group(job, GangScheduling("volcano")),
        build_pod_group(job, GangScheduling("sched")),
    ]


def test_builders_neither_mutate_nor_share_with_the_job() -> None:
    overrides, *_ = overrides_case()
    spec = wire(overrides)["spec"]
    spec["runPolicy"]["schedulingPolicy"] = {"minAvailable": 2, "minResources": {"cpu": "1"}}
    job = make_job("bar", "foo", annotations={"scheduling.volcano.sh/queue-name": "q"}, **spec)
    before = wire(job)
    built = every_object(job)
    reference = orjson.loads(orjson.dumps(built))
    assert wire(job) == before
    vandalize(built)  # also proves that no builder hands out a module-level constant
    assert wire(job) == before
    assert every_object(job) == reference
