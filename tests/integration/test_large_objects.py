"""Objects as large as the cluster stores them stream through the reconciler's watches.

Regression for issue 7: a watch event over aiohttp's line buffer (an MPIJob with large templates)
raised LineTooLong, which nothing caught, and the process exited, then crash-looped since the object
kept changing. etcd's default request limit is 1.5 MiB; this MPIJob is about 1.4 MiB.
"""

from __future__ import annotations

import orjson

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from tests.integration.mpijobs import Jobs
from tests.integration.operator_fixtures import ReconcilerControl

TEMPLATE_BYTES = 700 * 1024  # in each of the two templates


def padded(job: dict[str, object]) -> dict[str, object]:
    """The job with ~TEMPLATE_BYTES of environment in the first container of each template."""
    for replica in job["spec"]["mpiReplicaSpecs"].values():  # type: ignore[index]
        container = replica["template"]["spec"]["containers"][0]
        container["env"] = [{"name": f"PAD_{i}", "value": "x" * 1000} for i in range(TEMPLATE_BYTES // 1024)]
    return job


def test_mpijob_of_1_4_mib_runs_and_the_reconciler_survives(cluster: LocalCluster, namespace: str,
                                                            reconciler: ReconcilerControl) -> None:
    job = padded(mpijob("huge", 2))
    size = len(orjson.dumps(job))
    assert 1.3 * 2**20 < size < 1.5 * 2**20
    jobs = Jobs(cluster, namespace)
    jobs.create(job)
    jobs.wait_condition("huge", "Succeeded", timeout=120)
    launcher = jobs.object("jobs", "huge-launcher", "batch/v1")
    assert launcher is not None
    env = launcher["spec"]["template"]["spec"]["containers"][0]["env"]
    assert sum(1 for var in env if var["name"].startswith("PAD_")) == TEMPLATE_BYTES // 1024
    assert reconciler.process.alive()
    log = reconciler.process.log.read_text(errors="replace")
    assert "LineTooLong" not in log
    assert "Traceback" not in log
