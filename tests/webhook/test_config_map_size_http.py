"""The webhook's ``--cluster-domain`` reaches validation: the same job fits with ``...svc`` host names and is
refused with ``...svc.cluster.local`` ones (the sizes: tests/unit/test_config_map_size.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from tests.webhook.conftest import Client, review
from webhook.__main__ import parse_args
from webhook.app import VALIDATE_PATH, create_app

LONG_NAME = "a" * 36 + "-job"
CONTAINER = {"name": "main", "image": "mpi-pi"}


def long_named_job(workers: int) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": LONG_NAME, "namespace": "default"},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [CONTAINER]}}},
                                         "Worker": {"replicas": workers,
                                                    "template": {"spec": {"containers": [CONTAINER]}}}}}}


async def allowed(client: Client, workers: int) -> bool:
    resp = await client.post(VALIDATE_PATH, data=orjson.dumps(review(long_named_job(workers))),
                              headers={"Content-Type": "application/json"})
    assert resp.status == 200
    return bool(orjson.loads(await resp.read())["response"]["allowed"])


async def test_the_cluster_domain_flag_lengthens_the_counted_host_names(
        aiohttp_client: Callable[..., Awaitable[Client]]) -> None:
    assert parse_args(["--tls-cert-file", "c", "--tls-key-file", "k"]).cluster_domain == ""
    args = parse_args(["--tls-cert-file", "c", "--tls-key-file", "k", "--cluster-domain", "cluster.local"])
    with_domain = await aiohttp_client(create_app(cluster_domain=args.cluster_domain))
    without = await aiohttp_client(create_app())
    assert await allowed(without, 4_400)
    assert not await allowed(with_domain, 4_400)
    assert await allowed(with_domain, 3_900)
    assert not await allowed(without, 4_800)
