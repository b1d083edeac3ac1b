"""The rotation loop (reconciler/certs/rotator.py) over a fake of its own seam, ``Cluster``: the Secret written with a
version check, the three caBundles patched, and, simulated second by second over several CA lifetimes with a
kubelet that delivers each Secret version late, never a moment when the certificate served is not trusted."""

from __future__ import annotations

import copy
import itertools
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import jsonpatch
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from reconciler.certs.material import Material, certificates_of_bundle
from reconciler.certs.plan import Policy
from reconciler.certs.rotator import RotationMetrics, Rotator, StoredSecret
from reconciler.certs.targets import CERT_MANAGER_ANNOTATION, CRD, MUTATING, TARGETS, VALIDATING, Target
from reconciler.runtime.client import ApiError
from shared.certificates import build_ca, build_serving_cert, ca_bundle_b64, cert_pem, issued_by, key_pem
from shared.jsondict import JSONDict

T0 = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
NAMES = ("mpijob-webhook.mpi-operator.svc",)
# minutes, as the end-to-end test runs them: a serving certificate renewed every 40 s, a CA every 90 s
FAST = Policy(NAMES, serving_duration=timedelta(minutes=2), serving_renew_before=timedelta(seconds=80),
              ca_duration=timedelta(minutes=4), ca_renew_before=timedelta(seconds=150))


def webhook_configuration(kind: str, hooks: int = 1) -> JSONDict:
    return {"kind": kind, "metadata": {"name": "mpijob-webhook", "resourceVersion": "1"},
            "webhooks": [{"name": f"hook-{i}.kubeflow.org", "clientConfig": {"service": {"name": "mpijob-webhook"}}}
                         for i in range(hooks)]}


def crd() -> JSONDict:
    return {"kind": "CustomResourceDefinition", "metadata": {"name": "mpijobs.kubeflow.org", "resourceVersion": "1"},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
                "name": "mpijob-webhook", "path": "/convert"}}}}}}


@dataclass
class FakeCluster:
    """The seam, in memory: a Secret with a resourceVersion, and the objects jsonpatch patches."""

    now: datetime = T0
    stored: StoredSecret | None = None
    objects: dict[Target, JSONDict | None] = field(default_factory=lambda: {
        MUTATING: webhook_configuration("MutatingWebhookConfiguration"),
        VALIDATING: webhook_configuration("ValidatingWebhookConfiguration", hooks=2), CRD: crd()})
    writes: list[tuple[datetime, StoredSecret]] = field(default_factory=list)
    patches: list[tuple[Target, list[JSONDict]]] = field(default_factory=list)
    version: int = 0

    async def wait_synced(self) -> None:
        pass

    def secret(self) -> StoredSecret | None:
        return self.stored

    def target(self, target: Target) -> JSONDict | None:
        return copy.deepcopy(self.objects[target])

    async def save_secret(self, data: dict[str, str], previous: StoredSecret | None) -> None:
        if previous != self.stored:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.version += 1
        merged = {**(self.stored.data if self.stored else {}), **data}
        self.stored = StoredSecret(merged, str(self.version))
        self.writes.append((self.now, self.stored))

    async def patch_target(self, target: Target, patch: list[JSONDict]) -> None:
        self.objects[target] = jsonpatch.apply_patch(self.objects[target], patch)
        self.patches.append((target, patch))

    async def changed(self, seconds: float) -> None:
        pass

    def bundles(self) -> dict[Target, list[str] | None]:
        return {t: t.bundles(self.objects[t]) for t in TARGETS}


def rotator(cluster: FakeCluster, policy: Policy = FAST, metrics: RotationMetrics | None = None) -> Rotator:
    return Rotator(cluster, policy, metrics, clock=lambda: cluster.now)


def material(cluster: FakeCluster) -> Material:
    assert cluster.stored is not None
    return Material.from_secret_data(cluster.stored.data)


async def test_a_first_start_writes_the_secret_and_every_ca_bundle() -> None:
    cluster, metrics = FakeCluster(), RotationMetrics(CollectorRegistry())
    await rotator(cluster, metrics=metrics).step()
    written = material(cluster)
    assert written.signer is not None
    assert written.pair_matches
    bundle = ca_bundle_b64(written.ca_crt)
    assert cluster.bundles() == {MUTATING: [bundle], VALIDATING: [bundle, bundle], CRD: [bundle]}
    assert [t for t, _ in cluster.patches] == [MUTATING, VALIDATING, CRD]
    # the patch names each webhook, so a list reordered meanwhile fails instead of taking a wrong caBundle
    assert {"op": "test", "path": "/webhooks/1/name", "value": "hook-1.kubeflow.org"} in cluster.patches[1][1]
    assert metrics.renewals.labels("ca")._value.get() == 1
    assert metrics.renewals.labels("serving")._value.get() == 1


async def test_a_step_with_nothing_due_writes_nothing() -> None:
    cluster = FakeCluster()
    rot = rotator(cluster)
    await rot.step()
    writes, patches = len(cluster.writes), len(cluster.patches)
    cluster.now += timedelta(seconds=10)
    await rot.step()
    assert (len(cluster.writes), len(cluster.patches)) == (writes, patches)


async def test_a_configuration_applied_later_without_its_ca_bundle_is_patched() -> None:
    cluster = FakeCluster()
    cluster.objects[VALIDATING] = None  # the install order: the configurations come last
    rot = rotator(cluster)
    await rot.step()
    assert cluster.bundles()[VALIDATING] is None
    cluster.objects[VALIDATING] = webhook_configuration("ValidatingWebhookConfiguration")
    await rot.step()
    assert cluster.bundles()[VALIDATING] == [ca_bundle_b64(material(cluster).ca_crt)]


async def test_a_crd_without_a_conversion_webhook_is_left_alone() -> None:
    cluster = FakeCluster()
    cluster.objects[CRD] = {"metadata": {"name": "mpijobs.kubeflow.org"}, "spec": {"conversion": {"strategy": "None"}}}
    await rotator(cluster).step()
    assert cluster.objects[CRD] == {"metadata": {"name": "mpijobs.kubeflow.org"},
                                    "spec": {"conversion": {"strategy": "None"}}}


async def test_a_secret_written_meanwhile_is_a_conflict_retried_soon_without_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    cluster, metrics = FakeCluster(), RotationMetrics(CollectorRegistry())
    rot = rotator(cluster, metrics=metrics)
    await rot.step()

    async def save(data: dict[str, str], previous: StoredSecret | None) -> None:
        raise ApiError(409, "Conflict", "the object has been modified")

    cluster.save_secret = save  # type: ignore[method-assign]
    cluster.stored = StoredSecret({}, "100")  # emptied: a write is needed, and refused
    wake = await rot.step_safely()
    assert wake == T0 + timedelta(seconds=1)
    assert metrics.errors._value.get() == 0
    assert "changed meanwhile" in caplog.text


async def test_an_api_failure_is_counted_and_backed_off(caplog: pytest.LogCaptureFixture) -> None:
    cluster, metrics = FakeCluster(), RotationMetrics(CollectorRegistry())

    async def refuse(target: Target, patch: list[JSONDict]) -> None:
        raise ApiError(403, "Forbidden", "cannot patch")

    cluster.patch_target = refuse  # type: ignore[method-assign]
    rot = rotator(cluster, metrics=metrics)
    waits = [(await rot.step_safely()) - T0 for _ in range(8)]
    assert waits == [timedelta(seconds=s) for s in (1, 2, 4, 8, 16, 32, 60, 60)]
    assert metrics.errors._value.get() == 8
    assert "RBAC: deploy/certs/builtin binds what it needs" in caplog.text


async def test_the_cert_manager_annotation_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster()
    obj = cluster.objects[MUTATING]
    assert obj is not None
    obj["metadata"]["annotations"] = {CERT_MANAGER_ANNOTATION: "mpi-operator/mpijob-webhook"}
    caplog.set_level("INFO")
    await rotator(cluster).step()
    assert "cert_manager_annotation=mpi-operator/mpijob-webhook" in caplog.text or \
        any(getattr(r, "kv", {}).get("cert_manager_annotation") for r in caplog.records)


async def test_a_first_start_over_a_ca_made_by_hand_keeps_it_trusted_and_waits_before_switching() -> None:
    """The README's manual path before: a Secret with tls.crt and tls.key only, the caBundles holding the CA."""
    ca, ca_key = build_ca("manual", validity=timedelta(days=3650), now=T0 - timedelta(days=10))
    cert, key = build_serving_cert(ca, ca_key, NAMES, validity=timedelta(days=365), now=T0 - timedelta(days=10))
    cluster = FakeCluster(stored=StoredSecret(Material(cert_pem(cert), key_pem(key)).secret_data(), "7"))
    manual = ca_bundle_b64(cert_pem(ca))
    for target in TARGETS:
        await cluster.patch_target(target, target.patch(cluster.objects[target], manual))
    rot = rotator(cluster, Policy(NAMES))
    await rot.step()
    first = material(cluster)
    assert first.cert == cert
    assert first.trusted[1:] == (ca,)
    assert all(trusted_everywhere(cluster, c) for c in first.trusted)
    cluster.now += timedelta(seconds=1)
    await rot.step()  # every caBundle trusts the new CA from now on
    cluster.now += timedelta(seconds=16)
    await rot.step()
    switched = material(cluster)
    assert switched.cert != cert
    assert switched.signer is not None
    assert switched.cert is not None
    assert issued_by(switched.cert, switched.signer)


def trusted_everywhere(cluster: FakeCluster, ca: x509.Certificate) -> bool:
    return all(ca in certificates_of_bundle(b) for bundles in cluster.bundles().values() for b in bundles or [])


@dataclass
class Kubelet:
    """A webhook pod's view of the Secret: each version reaches it after its own delay (kubelet's sync, then the
    webhook's 2 s reload), never an older one after a newer."""

    max_delay: float
    rng: random.Random
    delivered: dict[int, datetime] = field(default_factory=dict)
    serving: tuple[int, Material] | None = None

    def tick(self, cluster: FakeCluster) -> Material | None:
        for index, (written, _) in enumerate(cluster.writes):
            self.delivered.setdefault(index, written + timedelta(seconds=self.rng.uniform(0, self.max_delay) + 2))
        due = [i for i, at in self.delivered.items() if at <= cluster.now]
        if due and (self.serving is None or max(due) > self.serving[0]):
            self.serving = (max(due), Material.from_secret_data(cluster.writes[max(due)][1].data))
        return self.serving[1] if self.serving else None


@dataclass
class Simulated:
    checks: int = 0
    failures: list[tuple[timedelta, bool, bool]] = field(default_factory=list)
    cas: int = 0
    serving: int = 0
    drops: int = 0


async def simulate(wake: str, seed: int, *, naive: bool = False) -> Simulated:
    """Twelve minutes, second by second, of the rotator and two pods. ``naive``: the Secret keeps only the newest CA
    (a CA replaced instead of overlapped), as a check that the simulation sees what that breaks."""
    cluster = NaiveCluster() if naive else FakeCluster()
    pods = [Kubelet(60.0, random.Random(seed * 10 + i)) for i in range(2)]
    rot, result, wake_at = rotator(cluster), Simulated(), T0
    while cluster.now < T0 + timedelta(minutes=12):
        if wake == "every-second" or cluster.now >= wake_at:
            writes = len(cluster.writes) + len(cluster.patches)
            wake_at = await rot.step()
            if len(cluster.writes) + len(cluster.patches) > writes:  # its own write: the watch wakes it again
                wake_at = min(wake_at, cluster.now + timedelta(seconds=1))
        for pod in pods:
            served = pod.tick(cluster)
            if served is None or served.cert is None:
                continue
            result.checks += 1
            cert, bundles = served.cert, [b for bs in cluster.bundles().values() for b in bs or []]
            valid = cert.not_valid_before_utc <= cluster.now < cert.not_valid_after_utc
            trusted = all(any(issued_by(cert, ca) for ca in certificates_of_bundle(b)) for b in bundles)
            if not (valid and trusted):
                result.failures.append((cluster.now - T0, valid, trusted))
        cluster.now += timedelta(seconds=1)
    written = [material_at(w) for _, w in cluster.writes]
    result.cas, result.serving = len({m.signer for m in written}), len({m.cert for m in written})
    result.drops = sum(len(after.trusted) < len(before.trusted) for before, after in itertools.pairwise(written))
    return result


class NaiveCluster(FakeCluster):
    async def save_secret(self, data: dict[str, str], previous: StoredSecret | None) -> None:
        newest = Material.from_secret_data(data).trusted[:1]
        await super().save_secret({**data, "ca.crt": ca_bundle_b64(b"".join(cert_pem(c) for c in newest))},
                                  previous)
        if self.stored is not None:  # the fake compares versions by value: keep the one it stored
            self.writes[-1] = (self.now, self.stored)


@pytest.mark.parametrize("wake", ["every-second", "deadlines-and-events"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_what_is_served_is_always_trusted_while_certificates_live_minutes(wake: str, seed: int) -> None:
    """A serving certificate renewed every 40 s and a CA every 90 s, kubelet delivering each Secret version to
    each pod within 60 s: at every second, what a pod serves is valid and trusted by every caBundle, so the API
    server would have made no failed call."""
    result = await simulate(wake, seed)
    print(f"seed {seed} ({wake}): {result.checks} checks, {len(result.failures)} failures; {result.cas} CAs, "
          f"{result.serving} serving certificates, {result.drops} writes dropping an expired CA")
    assert result.failures == []
    assert result.cas >= 6
    assert result.serving >= 15
    assert result.drops >= 4


async def test_the_simulation_sees_the_failures_of_a_ca_replaced_instead_of_overlapped() -> None:
    result = await simulate("every-second", 1, naive=True)
    print(f"naive: {len(result.failures)} failed seconds of {result.checks}")
    assert result.failures
    assert all(valid and not trusted for _, valid, trusted in result.failures)


def material_at(stored: StoredSecret) -> Material:
    return Material.from_secret_data(stored.data)


def test_the_reconciler_runs_the_rotation_only_with_its_flag() -> None:
    from reconciler.certs import webhook_certificates  # noqa: PLC0415
    from reconciler.options import parse_options  # noqa: PLC0415

    assert webhook_certificates(parse_options([]), CollectorRegistry()) == ()
    (task,) = webhook_certificates(parse_options(["--manage-webhook-certificates"]), CollectorRegistry())
    assert callable(task)
