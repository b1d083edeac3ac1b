"""Children that drifted converge in one write with replace semantics, and then stay quiet (issue 7); a child
changed again behind the reconciler's back makes that write conflict: a quiet requeue, then convergence."""

from __future__ import annotations

import base64
import copy
import logging
from typing import Any, cast

import pytest

from reconciler.mpijob import builders
from reconciler.mpijob.builders import SSHKeyPair
from reconciler.mpijob.controller import Controller
from reconciler.mpijob.custom_resources import MPIJOBS
from reconciler.runtime.api_resources import CONFIG_MAPS, SECRETS, SERVICES, Resource
from reconciler.runtime.client import KubeClient
from reconciler.runtime.workqueue import WorkQueue
from shared.jsondict import JSONDict
from tests.unit.reconciler.test_sync import KEYS, World, created_condition, defaulted, new_mpijob


class CountingKeygen:
    """A distinct key pair per call, so that a rotation shows."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> SSHKeyPair:
        self.calls += 1
        return SSHKeyPair(f"private-{self.calls}\n".encode(), f"public-{self.calls}\n".encode())


def running_job_world() -> World:
    job = new_mpijob(workers=1)
    job["status"] = {"conditions": [created_condition()], "startTime": "2026-11-29T11:00:00Z"}
    world = World(job)
    world.add_workers(1)
    world.add_launcher()
    return world


def writes_to(world: World, plural: str) -> list[tuple[str, str, str]]:
    return [action for action in world.cluster.actions if action[1] == plural]


async def test_secret_with_an_extra_key_loses_it_in_one_write_and_keeps_its_key_pair() -> None:
    world = running_job_world()
    job = defaulted(world.job or {})
    world.cluster.given(SERVICES, builders.build_service(job))
    world.cluster.given(CONFIG_MAPS, builders.build_config_map(job, "", []))
    secret = builders.build_ssh_secret(job, KEYS)
    secret["data"]["extra"] = base64.b64encode(b"not ours to keep").decode()
    world.cluster.given(SECRETS, secret)
    keygen = CountingKeygen()
    world.reconciler.shared.keygen = keygen
    for _ in range(3):
        await world.sync()
        world.cluster.catch_up()
    assert writes_to(world, "secrets") == [("patch", "secrets", "test-ssh")], "one write, then nothing"
    assert keygen.calls == 0, "an intact key pair is never regenerated"
    stored = world.cluster.server[("secrets", "default", "test-ssh")]
    assert stored["data"] == builders.build_ssh_secret(job, KEYS)["data"]


async def test_secret_that_lost_a_key_gets_a_new_pair_and_no_extra_key() -> None:
    world = running_job_world()
    job = defaulted(world.job or {})
    world.cluster.given(SERVICES, builders.build_service(job))
    world.cluster.given(CONFIG_MAPS, builders.build_config_map(job, "", []))
    secret = builders.build_ssh_secret(job, KEYS)
    del secret["data"]["ssh-publickey"]
    secret["data"]["extra"] = "eA=="
    world.cluster.given(SECRETS, secret)
    keygen = CountingKeygen()
    world.reconciler.shared.keygen = keygen
    for _ in range(3):
        await world.sync()
        world.cluster.catch_up()
    assert writes_to(world, "secrets") == [("patch", "secrets", "test-ssh")]
    assert keygen.calls == 1
    stored = world.cluster.server[("secrets", "default", "test-ssh")]
    assert stored["data"] == builders.build_ssh_secret(job, SSHKeyPair(b"private-1\n", b"public-1\n"))["data"]


async def test_service_with_an_extra_selector_key_converges_in_one_write() -> None:
    world = running_job_world()
    job = defaulted(world.job or {})
    service = builders.build_service(job)
    service["spec"]["selector"]["extra"] = "selects-nothing"
    world.cluster.given(SERVICES, service)
    world.cluster.given(CONFIG_MAPS, builders.build_config_map(job, "", []))
    world.cluster.given(SECRETS, builders.build_ssh_secret(job, KEYS))
    for _ in range(3):
        await world.sync()
        world.cluster.catch_up()
    assert writes_to(world, "services") == [("patch", "services", "test")], "one write, then nothing"
    stored = world.cluster.server[("services", "default", "test")]
    assert stored["spec"] == builders.build_service(job)["spec"]


async def test_config_map_with_an_extra_key_converges_in_one_write() -> None:
    world = running_job_world()
    job = defaulted(world.job or {})
    world.cluster.given(SERVICES, builders.build_service(job))
    config = builders.build_config_map(job, "", [])
    config["data"]["extra"] = "x"
    world.cluster.given(CONFIG_MAPS, config)
    world.cluster.given(SECRETS, builders.build_ssh_secret(job, KEYS))
    for _ in range(3):
        await world.sync()
        world.cluster.catch_up()
    assert writes_to(world, "configmaps") == [("patch", "configmaps", "test-config")]
    assert world.cluster.server[("configmaps", "default", "test-config")]["data"] == builders.build_config_map(
        job, "", [])["data"]


def drifted_config_map(job: JSONDict) -> JSONDict:
    config = builders.build_config_map(defaulted(job), "", [])
    config["data"]["extra"] = "x"
    return config


def drifted_service(job: JSONDict) -> JSONDict:
    service = builders.build_service(defaulted(job))
    service["spec"]["selector"]["extra"] = "selects-nothing"
    return service


def drift_again(obj: JSONDict) -> JSONDict:
    """``obj`` as someone else changes it once more: a new resourceVersion the cache has not seen yet."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = "2"
    if "data" in obj:
        obj["data"]["another"] = "y"
    else:
        obj["spec"]["selector"]["another"] = "y"
    return obj


@pytest.mark.parametrize(("resource", "name", "drifted", "desired"), [
    pytest.param(CONFIG_MAPS, "test-config", drifted_config_map,
                 lambda job: {"data": builders.build_config_map(job, "", [])["data"]}, id="configmap"),
    pytest.param(SERVICES, "test", drifted_service,
                 lambda job: {"spec": builders.build_service(job)["spec"]}, id="service"),
])
async def test_a_drifted_child_changed_again_conflicts_quietly_then_converges(
        resource: Resource, name: str, drifted: Any, desired: Any, caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    controller = Controller(cast(KubeClient, None), world.reconciler, WorkQueue())  # its stores are the caches
    job = new_mpijob(workers=1)
    job["status"] = {"conditions": [created_condition()], "startTime": "2026-11-29T11:00:00Z"}
    world.job = job
    world.cluster.given(MPIJOBS, job)
    world.add_workers(1)
    world.add_launcher()
    model = defaulted(job)
    children = {SERVICES: builders.build_service(model), CONFIG_MAPS: builders.build_config_map(model, "", []),
                SECRETS: builders.build_ssh_secret(model, KEYS), resource: drifted(job)}
    for child_resource, child in children.items():
        world.cluster.given(child_resource, child)
    cached = children[resource]
    world.cluster.given(resource, drift_again(cached), cached=False)
    caplog.set_level(logging.DEBUG, logger="reconciler")

    await controller.process("default/test")
    assert writes_to(world, resource.plural) == [("patch", resource.plural, name)]
    assert controller.queue.retries("default/test") == 1, "a conflict is requeued"
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("INFO", "sync requeued", None), ("INFO", "sync", None)], "quietly: no warning, no traceback"
    assert [getattr(r, "kv", {}).get("outcome") for r in caplog.records][-1] == "conflict"
    assert "409 Conflict" in getattr(caplog.records[0], "kv", {})["error"]

    world.cluster.catch_up()  # the watch delivers the other change
    await controller.process("default/test")
    assert [getattr(r, "kv", {}).get("outcome") for r in caplog.records][-1] == "synced"
    assert controller.queue.retries("default/test") == 0
    stored = world.cluster.server[(resource.plural, "default", name)]
    assert {key: stored[key] for key in desired(model)} == desired(model), "both changes undone"
    assert stored["metadata"]["resourceVersion"] not in ("1", "2"), "written once, on the version it read"

    world.cluster.catch_up()
    await controller.process("default/test")
    assert writes_to(world, resource.plural) == [("patch", resource.plural, name)] * 2, "then nothing"
    assert [verb for verb, *_ in world.cluster.actions].count("create") == 0, "no second copy of anything"
    controller.queue.shutdown()
