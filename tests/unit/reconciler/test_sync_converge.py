"""Children that drifted converge in one write with replace semantics, and then stay quiet (issue 7)."""

from __future__ import annotations

import base64

from reconciler.mpijob import builders
from reconciler.mpijob.builders import SSHKeyPair
from reconciler.runtime.resources import CONFIG_MAPS, SECRETS, SERVICES
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
    world.reconciler.keygen = keygen
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
    world.reconciler.keygen = keygen
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
