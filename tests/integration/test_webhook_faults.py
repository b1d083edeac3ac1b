"""The webhook killed (and hung) under each failurePolicy we ship, against the real API server.

Each test runs its own ``python -m webhook`` and registers the shipped configurations
(deploy/webhook/*-webhook-configuration.yaml: failurePolicy, timeoutSeconds, rules unchanged) under
names of its own, narrowed to its own namespace, so the session's ``mpijob-webhook`` and every other
test are untouched while this webhook is down; everything is removed in a ``finally``.

What deploy/docs say and these tests check:
- validating, ``Fail``: while no webhook answers, MPIJob creates and updates are refused with an error
  naming the webhook; deletes still work (DELETE is not in the rules); once it is back, creates work.
- mutating, ``Ignore``: while no webhook answers, creates are stored, without the persisted defaults;
  once it is back, they are defaulted again.
"""

from __future__ import annotations

import copy
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import LocalCluster
from hack.devcluster.operators import OperatorWebhook
from hack.devcluster.wait import wait_for
from tests.secret_scan import assert_clean, scan_files

CONTAINER = {"name": "main", "image": "mpi-image"}
KINDS = {"MutatingWebhookConfiguration": "mutating", "ValidatingWebhookConfiguration": "validating"}


def mpijob(name: str, launcher_replicas: int | None = None) -> dict[str, Any]:
    launcher: dict[str, Any] = {"template": {"spec": {"containers": [dict(CONTAINER)]}}}
    if launcher_replicas is not None:
        launcher["replicas"] = launcher_replicas
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"mpiReplicaSpecs": {"Launcher": launcher,
                                         "Worker": {"replicas": 1, "template": {"spec": {"containers": [
                                             dict(CONTAINER)]}}}}}}


@dataclass
class Registered:
    """Our own webhook process and the shipped configurations (some of them) pointing at it."""

    cluster: LocalCluster
    process: OperatorWebhook
    namespace: str
    configs: list[dict[str, Any]]

    @property
    def policies(self) -> dict[str, str]:
        return {KINDS[c["kind"]]: c["webhooks"][0]["failurePolicy"] for c in self.configs}

    @property
    def fails_closed(self) -> bool:
        return any(h["failurePolicy"] == "Fail" for c in self.configs for h in c["webhooks"])

    def hook_names(self) -> list[str]:
        return [h["name"] for c in self.configs for h in c["webhooks"]]

    def kubectl(self, *args: str, obj: Any = None) -> Any:
        return self.cluster.kubectl("-n", self.namespace, *args, input=yaml.safe_dump(obj) if obj else None,
                                    timeout=90)

    def create(self, name: str, **kw: Any) -> Any:
        return self.kubectl("create", "-f", "-", obj=mpijob(name, **kw))

    def stored(self, name: str) -> dict[str, Any]:
        result = self.kubectl("get", "mpijob", name, "-o", "yaml")
        assert result.returncode == 0, result.stderr
        loaded: dict[str, Any] = yaml.safe_load(result.stdout)
        return loaded

    def other_mpijob_mutators(self) -> list[str]:
        """Mutating configurations other than ours that also intercept MPIJobs (e.g. the session's)."""
        items = yaml.safe_load(self.cluster.kubectl("get", "mutatingwebhookconfigurations", "-o", "yaml",
                                                    check=True).stdout)["items"]
        ours = {c["metadata"]["name"] for c in self.configs}
        return [i["metadata"]["name"] for i in items if i["metadata"]["name"] not in ours and any(
            "mpijobs" in r.get("resources", []) for h in i.get("webhooks", []) for r in h.get("rules", []))]


def shipped_subset(process: OperatorWebhook, which: str, namespace: str) -> list[dict[str, Any]]:
    """The shipped configurations (``which``: mutating, validating or both), renamed and narrowed to one
    namespace and to the MPIJob webhooks (not the IndexedJob backend's pod webhook); failurePolicy, timeoutSeconds
    and rules exactly as shipped."""
    suffix = uuid.uuid4().hex[:6]
    configs = []
    for shipped in process.configurations():
        if which not in ("both", KINDS[shipped["kind"]]):
            continue
        config = copy.deepcopy(shipped)
        config["metadata"]["name"] = f"mpijob-webhook-faults-{suffix}"
        config["webhooks"] = [h for h in config["webhooks"] if any("mpijobs" in r["resources"] for r in h["rules"])]
        for hook in config["webhooks"]:
            hook["namespaceSelector"].setdefault("matchExpressions", []).append(
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]})
        configs.append(config)
    return configs


@pytest.fixture(params=["validating", "mutating", "both"])
def registered(request: pytest.FixtureRequest, cluster: LocalCluster, namespace: str,
               tmp_path: Path) -> Iterator[Registered]:
    process = OperatorWebhook(cluster, tmp_path)
    reg = Registered(cluster, process, namespace, shipped_subset(process, request.param, namespace))
    process.start()
    try:
        process.wait_ready()
        cluster.kubectl("apply", "-f", "-", check=True, input=yaml.safe_dump_all(reg.configs))
        wait_called(reg)
        yield reg
    finally:
        for config in reg.configs:
            cluster.kubectl("delete", config["kind"].lower(), config["metadata"]["name"], "--ignore-not-found")
        if process.process is not None and process.alive():
            os.kill(process.process.pid, signal.SIGCONT)  # in case a test left it stopped
        process.kill()


def wait_called(reg: Registered) -> None:
    """Until the API server calls each of our webhooks: our process logs a dry-run create for each (another
    webhook registered for MPIJobs, such as the session's, may answer too, so its answer proves nothing)."""
    operations = {"validating": "op=validate", "mutating": "op=mutate"}

    def called() -> bool:
        reg.process.check_alive()
        reg.kubectl("create", "--dry-run=server", "-f", "-", obj=mpijob("canary"))
        lines = [line for line in reg.process.log.read_text().splitlines() if "msg=admission" in line]
        return all(any(operations[kind] in line for line in lines) for kind in reg.policies)

    wait_for(called, timeout=30, interval=0.2, what="the API server calling our webhook")


def assert_down_behaviour(reg: Registered, name: str, *, started: float, how: str) -> None:
    """One create while the webhook is down (or hung) behaves as its failurePolicy says."""
    result = reg.create(name)
    took = time.monotonic() - started
    if reg.fails_closed:
        assert result.returncode != 0, f"{how}: a create was stored while the Fail webhook was down"
        assert 'failed calling webhook "mpijob-validator.kubeflow.org"' in result.stderr, result.stderr
        assert reg.kubectl("get", "mpijob", name).returncode != 0
        print(f"{how}, policies {reg.policies}: create refused after {took:.1f} s: {result.stderr.strip()}")
    else:
        assert result.returncode == 0, f"{how}: the Ignore webhook refused a create: {result.stderr}"
        spec = reg.stored(name)["spec"]
        others = reg.other_mpijob_mutators()
        if not others:  # with the session's webhook registered too, that one defaults it
            # the API server still applies the CRD schema's defaults (slotsPerWorker, mpiImplementation, ...);
            # only the Go defaults that our webhook persists are missing
            assert spec["slotsPerWorker"] == 1
            assert {"replicas", "restartPolicy"}.isdisjoint(spec["mpiReplicaSpecs"]["Launcher"]), spec
            assert "restartPolicy" not in spec["mpiReplicaSpecs"]["Worker"]
            assert "cleanPodPolicy" not in spec.get("runPolicy", {})
        defaults = f"defaulted by {others}" if others else "without the webhook's defaults"
        print(f"{how}, policies {reg.policies}: create stored after {took:.1f} s, {defaults}")


def assert_back(reg: Registered, name: str) -> None:
    """After a restart: creates work again, defaulted (mutating) and judged (validating) by our webhook."""
    reg.process.start()
    reg.process.wait_ready()
    wait_for(lambda: reg.create(name).returncode == 0, timeout=30, interval=0.5, what="a create to work again")
    spec = reg.stored(name)["spec"]
    if "mutating" in reg.policies:
        assert spec["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
        assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"
        assert spec["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
        assert spec["runPolicy"]["cleanPodPolicy"] == "None"
    if "validating" in reg.policies:
        refused = reg.create(f"{name}-bad", launcher_replicas=2)
        assert refused.returncode != 0
        assert "spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: 2: must be 1" in refused.stderr


def test_webhook_killed(registered: Registered) -> None:
    reg = registered
    before = reg.create("before")
    assert before.returncode == 0, before.stderr
    reg.process.kill()  # SIGKILL: connections are refused at once
    assert_down_behaviour(reg, "during", started=time.monotonic(), how="killed")
    if reg.fails_closed:
        update = reg.kubectl("label", "mpijob", "before", "team=a")
        assert update.returncode != 0
        assert "failed calling webhook" in update.stderr
    deleted = reg.kubectl("delete", "mpijob", "before", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr  # DELETE is not in the rules: never blocked
    assert_back(reg, "after")
    assert_clean(scan_files([reg.process.log]))  # two runs of the webhook, killed in between


@pytest.mark.faults
def test_webhook_hung(registered: Registered) -> None:
    """SIGSTOP: connections are accepted but never answered; the API server waits timeoutSeconds per webhook."""
    reg = registered
    assert reg.process.process is not None
    os.kill(reg.process.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert_down_behaviour(reg, "during", started=started, how="hung")
        timeouts = sum(h["timeoutSeconds"] for c in reg.configs for h in c["webhooks"])
        assert time.monotonic() - started >= min(h["timeoutSeconds"] for c in reg.configs for h in c["webhooks"])
        assert time.monotonic() - started < 3 * timeouts + 30
    finally:
        os.kill(reg.process.process.pid, signal.SIGCONT)
    wait_for(lambda: reg.create("after").returncode == 0, timeout=30, interval=0.5, what="a create to work again")
