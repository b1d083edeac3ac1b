"""Managed certificates that renew themselves, on the real control plane (issue 29).

The reconciler runs with ``--manage-webhook-certificates`` and certificates that live minutes (a serving
certificate of 2 minutes renewed 80 s ahead, a CA of 150 s renewed 105 s ahead), under its ServiceAccount's token
bound to ``deploy/rbac`` and ``deploy/certs/builtin/rbac.yaml``. Our webhook process serves from a directory updated
the way kubelet updates a Secret volume (a new timestamped directory, the ``..data`` link swapped atomically, the
items tls.crt and tls.key only), each Secret version delivered after a random delay of up to 45 s, as kubelet's sync
does. The shipped webhook configurations and the CRD's conversion webhook point at that process, without a caBundle:
the rotator fills them. For 3.5 minutes a loop makes admission requests (a valid MPIJob created with dryRun, an
invalid one refused by our validator) and conversion requests (MPIJobs listed through kubeflow.org/v2); every failure
is counted and printed, and there must be none, over at least two CA renewals, a CA dropped at its expiry and several
serving certificates, with the three caBundles following the Secret.

The lifetimes, and what bounds them. The serving certificate's (unchanged) are bound to the emulated kubelet's
delay: renewed 80 s ahead, a certificate reaches the webhook before it expires even when its issue waits 15 s for a
new CA to settle and kubelet delivers it 45 s late. The CA's are bound by that only: renewed 105 s ahead (more than
the serving certificate's 80 s, as the rotator requires), the last certificate a CA signed, replaced once its
successor has settled (15 s), reaches the webhook (within 45 s) 45 s before the CA expires. The CA is thus renewed
every 45 s, and 210 s of traffic see the CA rotations that 360 s saw with a CA of 4 minutes renewed 150 s ahead
(every 90 s): 4 renewals (5 CAs) and 2 CAs dropped at their expiry (150 and 195 s after the first was made). A
serving certificate, due 40 s after its issue, now finds the next CA made and waits for it to settle, so one is
issued per CA: 6 versions in 210 s instead of 9 in 360 s, each but the first two current for 45 s, kubelet's longest
delay, so that each is delivered; at least 4 served are checked, as before.

Not on the real node: its machine lock is shared with every e2e run; here the kubelet is emulated as described, with
delays longer than the real node's (whose kubelet syncs every 10 s).
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import os
import random
import socket
import ssl
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from hack.devcluster import LocalCluster
from hack.devcluster.mpijobs import mpijob
from hack.devcluster.operators import WEBHOOK_MANIFESTS, OperatorProcess, OperatorReconciler, OperatorWebhook
from hack.devcluster.processes import free_port
from hack.devcluster.rest import ApiError
from hack.devcluster.wait import wait_for
from tests.integration.operator_fixtures import ReconcilerControl
from tests.integration.test_least_privilege import Usage, audit_size, grants

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_RBAC = REPO_ROOT / "deploy" / "certs" / "builtin" / "rbac.yaml"
NAMESPACE, SECRET = "mpi-operator", "mpijob-webhook-tls"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}"
CONFIGURATIONS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
                  "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org"
FLAGS = ["--manage-webhook-certificates", "--webhook-cert-duration=2m", "--webhook-cert-renew-before=80s",
         "--webhook-ca-duration=150s", "--webhook-ca-renew-before=105s", "--webhook-cert-extra-dns-names=localhost"]
RUN_FOR = 210.0  # seconds of traffic: the fifth CA (180 s) and the second CA dropped (195 s), with a margin
MAX_KUBELET_DELAY = 45.0
JSON = dict[str, Any]


def certificates(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem) if b"BEGIN CERTIFICATE" in pem else []


def fingerprints(pem: bytes) -> tuple[str, ...]:
    return tuple(c.fingerprint(c.signature_hash_algorithm).hex()[:12] for c in certificates(pem)
                 if c.signature_hash_algorithm)


class Kubelet(threading.Thread):
    """Projects the Secret's tls.crt and tls.key into ``directory`` as kubelet does, each version late."""

    def __init__(self, cluster: LocalCluster, directory: Path, seed: int) -> None:
        super().__init__(daemon=True, name="kubelet-emulation")
        self.cluster, self.dir, self.rng = cluster, directory, random.Random(seed)
        self.stop = threading.Event()
        self.delays: list[float] = []
        self._projected: tuple[str, str] | None = None
        self._pending: tuple[float, tuple[str, str]] | None = None

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                data = self.cluster.rest.get(SECRET_PATH).get("data") or {}
            except ApiError:
                continue
            pair = (data.get("tls.crt", ""), data.get("tls.key", ""))
            if not all(pair) or pair == self._projected:
                continue
            if self._pending is None or self._pending[1] != pair:
                delay = 0.0 if self._projected is None else self.rng.uniform(0, MAX_KUBELET_DELAY)
                self._pending = (time.monotonic() + delay, pair)
                self.delays.append(delay)
            if time.monotonic() >= self._pending[0]:
                self._project(pair)

    def _project(self, pair: tuple[str, str]) -> None:
        version = self.dir / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{uuid.uuid4().hex[:6]}"
        version.mkdir()
        for name, value in zip(("tls.crt", "tls.key"), pair, strict=True):
            (version / name).write_bytes(base64.b64decode(value))
        old = (self.dir / "..data").resolve() if (self.dir / "..data").exists() else None
        tmp = self.dir / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.dir / "..data")
        for name in ("tls.crt", "tls.key"):
            if not (self.dir / name).is_symlink():
                (self.dir / name).symlink_to(f"..data/{name}")
        if old is not None:
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        self._projected, self._pending = pair, None


@dataclass
class Traffic:
    """Admission and conversion requests through the API server, counted by outcome."""

    cluster: LocalCluster
    namespace: str
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def once(self, i: int) -> None:
        base = f"/apis/kubeflow.org/v2beta1/namespaces/{self.namespace}/mpijobs"
        job = mpijob(f"admitted-{i % 7}", 1)
        status, text = self._request("POST", base + "?dryRun=All", job)
        self._count("admission allowed", status == 201, status, text)
        bad = copy.deepcopy(job)
        bad["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
        status, text = self._request("POST", base + "?dryRun=All", bad)
        self._count("admission denied", status == 422 and "must be 1" in text, status, text)
        status, text = self._request("GET", f"/apis/kubeflow.org/v2/namespaces/{self.namespace}/mpijobs")
        self._count("conversion", status == 200 and '"stored"' in text, status, text)

    def _request(self, method: str, path: str, body: JSON | None = None) -> tuple[int, str]:
        """One request, retried after a 429 as every Kubernetes client does (client-go, kubectl): a patched CRD
        makes the API server rebuild the MPIJob storage, answering "storage is (re)initializing" meanwhile."""
        for _ in range(10):
            status, text = self.cluster.rest.request_raw(method, path, json.dumps(body).encode() if body else None)
            if status != 429:
                return status, text
            self.counts["429 retried (storage re-initializing after a CRD update)"] += 1
            time.sleep(1.0)
        return status, text

    def _count(self, what: str, ok: bool, status: int, text: str) -> None:
        self.counts[f"{what}: {'ok' if ok else 'failed'}"] += 1
        if not ok:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {what}: {status} {text[:300]}")


def served_serial(port: int) -> str:
    """The serial of the certificate the webhook serves to a new connection (not verified: read only)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, \
            context.wrap_socket(sock, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return format(x509.load_der_x509_certificate(der).serial_number, "x")


def _serial_or_none(port: int) -> str | None:
    try:
        return served_serial(port)
    except OSError:
        return None


def ca_bundles(cluster: LocalCluster) -> dict[str, list[bytes]]:
    """Every caBundle of the three objects, decoded."""
    found: dict[str, list[bytes]] = {}
    for plural in CONFIGURATIONS.values():
        obj = cluster.rest.get(f"/apis/admissionregistration.k8s.io/v1/{plural}/mpijob-webhook")
        found[plural] = [base64.b64decode(h["clientConfig"].get("caBundle") or "") for h in obj["webhooks"]]
    crd = cluster.rest.get(CRD_PATH)
    found["crd"] = [base64.b64decode(crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle") or "")]
    return found


def point_at(cluster: LocalCluster, port: int) -> None:
    """The shipped configurations and the CRD's conversion webhook, by URL at our process, with no caBundle; both
    webhooks failing closed."""
    for path in sorted(WEBHOOK_MANIFESTS.glob("*-webhook-configuration.yaml")):
        config = yaml.safe_load(path.read_text())
        config["metadata"].pop("annotations", None)
        for hook in config["webhooks"]:
            hook["failurePolicy"] = "Fail"  # the defaulter fails open as shipped: here a failed call must show
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": f"https://localhost:{port}{service['path']}"}
        cluster.kubectl("delete", config["kind"].lower(), "mpijob-webhook", "--ignore-not-found", check=True)
        cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(config), check=True)
    patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
              "value": {"url": f"https://localhost:{port}/convert"}}]
    cluster.kubectl("patch", "crd", "mpijobs.kubeflow.org", "--type=json", "-p", json.dumps(patch), check=True)


def sar(cluster: LocalCluster, user: str, verb: str, group: str, resource: str, name: str = "") -> bool:
    review = cluster.rest.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                 "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "name": name}}})
    return bool(review["status"].get("allowed"))


@pytest.fixture
def rotation_rbac(cluster: LocalCluster) -> Iterator[None]:
    cluster.kubectl("apply", "-f", str(BUILTIN_RBAC), check=True)
    cluster.kubectl("-n", NAMESPACE, "delete", "secret", SECRET, "--ignore-not-found", check=True)
    try:
        yield
    finally:
        cluster.kubectl("delete", "-f", str(BUILTIN_RBAC), "--ignore-not-found", check=True)
        cluster.kubectl("-n", NAMESPACE, "delete", "secret", SECRET, "--ignore-not-found", check=True)


@pytest.mark.timeout(900)
def test_certificates_living_minutes_renew_without_a_failed_admission_or_conversion(  # noqa: PLR0915
        cluster: LocalCluster, alone: ReconcilerControl, api_v2: OperatorWebhook, rotation_rbac: None,
        namespace: str, tmp_path: Path) -> None:
    webhook = api_v2  # kubeflow.org/v2 on: the CRD's conversion webhook has a caBundle to keep current
    credentials = alone.refreshed_credentials()
    user = credentials.username
    # the rights: the three objects by name, nothing else of their kinds
    assert sar(cluster, user, "patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
               "mpijob-webhook")
    assert sar(cluster, user, "watch", "apiextensions.k8s.io", "customresourcedefinitions", "mpijobs.kubeflow.org")
    assert not sar(cluster, user, "patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "other")
    assert not sar(cluster, user, "list", "admissionregistration.k8s.io", "mutatingwebhookconfigurations")
    assert not sar(cluster, user, "patch", "apiextensions.k8s.io", "customresourcedefinitions", "other.example.com")

    port = free_port()
    served = tmp_path / "tls"
    served.mkdir()
    kubelet = Kubelet(cluster, served, seed=int(time.time()))
    reconciler = OperatorReconciler(cluster, tmp_path, *FLAGS, name="rotating-reconciler",
                                    kubeconfig=credentials.kubeconfig)
    process = OperatorProcess("rotation-webhook", [
        sys.executable, "-m", "webhook", "--port", str(port), "--bind-address", "127.0.0.1",
        "--tls-cert-file", str(served / "tls.crt"), "--tls-key-file", str(served / "tls.key")],
        tmp_path / "rotation-webhook.log")
    traffic = Traffic(cluster, namespace)
    audit_start = audit_size(cluster)
    try:
        point_at(cluster, port)  # the session's webhook is put back by webhook.register() below
        reconciler.start()
        kubelet.start()
        wait_for((served / "tls.crt").exists, timeout=60, what="the Secret made and projected")
        process.start()
        wait_for(lambda: process.check_alive() and bool(_serial_or_none(port)), timeout=30, what="the webhook serving")
        # the rotator fills the caBundles of the configurations created without one
        wait_for(lambda: all(b and b[0] for b in ca_bundles(cluster).values()), timeout=60, what="the caBundles")
        cluster.rest.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", mpijob(
            "stored", 1, runPolicy={"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}))

        def secret_bundle() -> bytes:
            return base64.b64decode(cluster.rest.get(SECRET_PATH)["data"]["ca.crt"])

        signers: list[str] = []
        serials: set[str] = set()
        bundle_sizes: list[int] = []
        followed = 0
        began, i = time.monotonic(), 0
        while time.monotonic() - began < RUN_FOR:
            traffic.once(i)
            i += 1
            if i % 5 == 0:
                bundle = secret_bundle()
                prints = fingerprints(bundle)
                if not signers or signers[-1] != prints[0]:
                    signers.append(prints[0])
                bundle_sizes.append(len(prints))
                serials.add(served_serial(port))
                if all(b == bundle for bs in ca_bundles(cluster).values() for b in bs):
                    followed += 1
            time.sleep(0.2)
        reconciler.check_alive()
        process.check_alive()
        # at the end every caBundle holds exactly the Secret's ca.crt (the rotator is idle between deadlines)
        wait_for(lambda: all(b == secret_bundle() for bs in ca_bundles(cluster).values() for b in bs), timeout=30,
                 what="the caBundles equal to the Secret's ca.crt")
    finally:
        kubelet.stop.set()
        process.stop()
        reconciler.stop()
        webhook.register()
    log = reconciler.log.read_text(errors="replace")
    assert cluster.audit_log is not None
    usage = Usage.of(cluster.audit_log, user, offset=audit_start)
    role = next(d for d in yaml.safe_load_all(BUILTIN_RBAC.read_text()) if d["kind"] == "ClusterRole")
    kinds = {resource for _, resource, _ in grants(role)}
    used = {g for g in usage.used if g[1] in kinds}
    print(f"audit: the rotation used {sorted(used)}; denied: {usage.denied}")
    print(f"\ntraffic: {dict(sorted(traffic.counts.items()))}; failures: {len(traffic.failures)}")
    print(f"CAs signing, in order: {signers}; caBundle sizes seen: {sorted(set(bundle_sizes))}; "
          f"serving serials seen on new connections: {len(serials)}; samples with every caBundle equal to the "
          f"Secret's ca.crt: {followed}/{len(bundle_sizes)}")
    print(f"kubelet emulation delays (s): {[round(d, 1) for d in kubelet.delays]}")
    print(f"reconciler: CAs created {log.count('webhook CA created')}, serving certificates issued "
          f"{log.count('webhook serving certificate issued')}, CAs dropped {log.count('webhook CA dropped')}, "
          f"caBundle updates {log.count('webhook caBundle updated')}, errors {log.count('rotation failed')}")
    for failure in traffic.failures[:20]:
        print(f"  {failure}")
    assert traffic.failures == [], f"{len(traffic.failures)} failed requests"
    assert sum(traffic.counts.values()) >= 300
    assert len(signers) >= 3, "at least two CA renewals while the traffic ran"
    assert log.count("webhook CA dropped") >= 1
    assert any(after < before for before, after in itertools.pairwise(bundle_sizes)), "a CA left the caBundle"
    assert len(serials) >= 4, "several serving certificates served"
    assert log.count("rotation failed") == 0
    # least privilege, from the audit log: nothing refused, and the ClusterRole is what the rotation used
    assert usage.denied == []
    assert used == grants(role)
    assert ("", "secrets", "patch") in usage.used  # the Secret: through the rights of deploy/rbac
