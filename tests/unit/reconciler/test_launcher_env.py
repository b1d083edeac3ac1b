"""Who wins when the user's launcher env and the operator's name the same variable (docs/user-guide.md, "The
launcher's environment"): the user, for the names we set beyond upstream's; upstream's names are appended after the
user's env, byte for byte, as upstream does (the kubelet uses the last definition)."""

from __future__ import annotations

import pytest

from reconciler.mpijob.builders import build_launcher_job
from shared.jsondict import JSONDict
from tests.unit.reconciler.helpers import make_job, replica
from tests.unit.reconciler.test_builders import (
    NVIDIA_BLANKING,
    OPENMPI_ENV,
    config_volume,
    launcher_job,
    pod_labels,
    ssh_volume,
)

# A non-default sshd port and key, and upstream's Open MPI 4 name set too
SSH_ARGS = "-p 2222 -i /etc/ssh-key/id"
OPENMPI_USER_ENV = [
    {"name": "PRTE_MCA_plm_ssh_args", "value": SSH_ARGS},
    {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": SSH_ARGS},
]
MPICH_USER_ENV = [
    {"name": "HYDRA_LAUNCHER_EXTRA_ARGS", "value": SSH_ARGS},
    {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": SSH_ARGS},
]
OPENMPI_APPENDED = [item for item in OPENMPI_ENV
                    if item["name"] not in ("PRTE_MCA_plm_ssh_args", "PRTE_MCA_prte_keep_fqdn_hostnames")]
MPICH_APPENDED = [
    {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
    {"name": "HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
    {"name": "HYDRA_LAUNCH_EXTRA_ARGS", "value": "-o ConnectionAttempts=10"},
]


def expected_launcher(env: list[JSONDict]) -> JSONDict:
    return launcher_job("foo", "bar", pod_labels("foo", "launcher"), {
        "containers": [{
            "env": env,
            "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"},
                             {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
        }],
        "hostname": "foo-launcher",
        "subdomain": "foo",
        "restartPolicy": "OnFailure",
        "volumes": [ssh_volume("foo"), config_volume("foo")],
    })


@pytest.mark.parametrize(("implementation", "user_env", "appended"), [
    pytest.param("OpenMPI", OPENMPI_USER_ENV, OPENMPI_APPENDED, id="OpenMPI"),
    pytest.param("MPICH", MPICH_USER_ENV, MPICH_APPENDED, id="MPICH"),
])
def test_the_users_value_wins_over_a_name_beyond_upstreams(implementation: str, user_env: list[JSONDict],
                                                           appended: list[JSONDict]) -> None:
    launcher = replica({"containers": [{"env": user_env}]})
    job = make_job("foo", "bar", mpiImplementation=implementation, mpiReplicaSpecs={"Launcher": launcher,
                                                                                     "Worker": replica()})
    assert build_launcher_job(job) == expected_launcher([*user_env, *appended, *NVIDIA_BLANKING])
    assert launcher["template"]["spec"]["containers"][0]["env"] == user_env  # the job's template is untouched
