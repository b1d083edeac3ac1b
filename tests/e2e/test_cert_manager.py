"""The operator's default certificate path against a real cert-manager, on the real node: the chart installed with its
default values (certificates.mode=cert-manager) as docs/operator-guide.md gives it ("With Helm"), with cert-manager's
controller, cainjector and webhook running as local processes against the API server (hack/devcluster/cert_manager.py,
built from the Go module proxy by hack/build/build-cert-manager.sh; without Go the module is skipped).

- the CA and serving Certificates become Ready, and cainjector injects the CA, byte for byte the one in the Secrets,
  into both webhook configurations and, once kubeflow.org/v2 is turned on (`helm upgrade --set apiVersions.v2=true`),
  into the CRD's conversion webhook; an MPIJob is admitted (defaulted by the webhook) and pi runs to success;
- a renewal forced as `cmctl renew` forces it (the Certificate's Issuing condition set through the status
  subresource) while admissions and conversions run in a loop: a new serving certificate (new serial) is issued,
  every webhook pod serves it (read over TLS), the caBundles stay, and not one request of the loop failed.

The module swaps the kustomize-deployed operator of the package (conftest.py) for the release, as test_helm.py does,
and at the end turns v2 off (docs/operator-guide.md: the conversion reset, then `helm upgrade --set
apiVersions.v2=false`), uninstalls the release, deploys the operator with kustomize again and stops cert-manager.
"""

from __future__ import annotations

import base64
import copy
import json
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509

from hack.devcluster import HarnessError, api_v2
from hack.devcluster.binaries import REPO_ROOT
from hack.devcluster.cert_manager import CertManager, CertManagerUnavailableError, find_cert_manager
from hack.devcluster.helm import CHART, RELEASE, RELEASE_NAMESPACE, find_helm, helm, value_flags
from hack.devcluster.mpijobs import JSON, idle_mpijob
from hack.devcluster.operator_deploy import (
    ADMISSION_CONFIGURATION,
    CRD_NAME,
    HELM_IMAGES,
    NAMESPACE,
    TLS_SECRET,
    WEBHOOK,
    adopt_crd,
    apply_crd,
    deploy,
    helm_uninstall,
    operator_objects,
    remove,
    remove_recreated_role,
    wait_ready,
    wait_removed,
)
from hack.devcluster.realnode import RealNodeCluster
from hack.devcluster.rest import ApiError, condition
from hack.devcluster.wait import wait_for
from shared.api import defaulted_dict
from tests.e2e.jobs import assert_pi, run_to_success, upstream_pi

CRD = ("CustomResourceDefinition", "", CRD_NAME)
DEPLOY = REPO_ROOT / "deploy"
CA_SECRET = "mpijob-webhook-ca"
CERTIFICATES = f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/certificates"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
WEBHOOK_PORT = 9443  # the webhook container's port (deploy/chart/mpi-operator/templates/webhook-deployment.yaml)
SERVICE_NAME = f"{WEBHOOK}.{NAMESPACE}.svc"  # the name the API server checks
# kubelet delivers a changed Secret within its sync period plus its cache's TTL (a minute or two), then the pods
# reload it within 2 s (deploy/certs/README.md).
DELIVERY_TIMEOUT = 240.0
AFTER_SWITCH = 30  # loop rounds run once every pod serves the new certificate


@dataclass
class Release:
    helm: Path
    cert_manager: CertManager
    timings: dict[str, float] = field(default_factory=dict)
    v2: bool = False


def _helm(release: Release, cluster: RealNodeCluster, *args: str) -> str:
    return helm(release.helm, *args, kubeconfig=cluster.kubeconfig)


@pytest.fixture(scope="module")
def release(real_cluster: RealNodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """cert-manager started; the package's operator removed (the CRD kept) and the chart installed with its default
    values but the images; at the end v2 turned off, the release uninstalled, the operator deployed with kustomize
    again and cert-manager stopped."""
    try:
        binary = find_helm()
    except HarnessError as exc:
        pytest.skip(f"helm is not available: {exc}")
    try:
        build = find_cert_manager()
    except CertManagerUnavailableError as exc:
        pytest.skip(str(exc))
    work_dir = tmp_path_factory.mktemp("cert-manager")
    cert_manager = CertManager(real_cluster, work_dir / "cert-manager", build)
    began = time.monotonic()
    try:
        cert_manager.install_crds()
        cert_manager.start()
        ready = cert_manager.wait_ready()
        print(f"\ncert-manager {build.bin_dir.parent.name}: running in {time.monotonic() - began:.1f} s "
              f"(controller and cainjector syncing {ready:.1f} s after the start)")
        remove(real_cluster, work_dir / "kustomize")
        assert operator_objects(real_cluster) == {CRD}
        result = Release(binary, cert_manager)
        began = time.monotonic()
        adopt_crd(real_cluster)
        _helm(result, real_cluster, "install", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}",
              *value_flags(HELM_IMAGES))
        result.timings = {"install": time.monotonic() - began, **wait_ready(real_cluster, 240, began)}
        yield result
    finally:
        try:
            if RELEASE in helm(binary, "list", f"--namespace={RELEASE_NAMESPACE}", "--short",
                               kubeconfig=real_cluster.kubeconfig).split():
                _uninstall_release(real_cluster, binary)
            elif operator_objects(real_cluster) != {CRD}:  # the kustomize install of the last test, left by a failure
                _kustomize_delete(real_cluster)
            deploy(real_cluster, work_dir / "kustomize-again")
        finally:
            cert_manager.stop()


def _uninstall_release(cluster: RealNodeCluster, binary: Path) -> None:
    """docs/operator-guide.md: kubeflow.org/v2 turned off when on (the conversion reset, then `helm upgrade
    --reuse-values --force-conflicts --set apiVersions.v2=false`), then `helm uninstall`: all but the CRD gone."""
    if api_v2.conversion_strategy(cluster) == "Webhook":
        cluster.kubectl("patch", "crd", CRD_NAME, "--type=merge", "-p", json.dumps(api_v2.CONVERSION_OFF), check=True)
        helm(binary, "upgrade", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}", "--reuse-values",
             "--force-conflicts", "--set", "apiVersions.v2=false", kubeconfig=cluster.kubeconfig)
        api_v2.wait_served(cluster, ["v2beta1"])  # and kubectl's discovery cache refreshed for the next tests
    helm_uninstall(cluster, binary)


def _kubectl(cluster: RealNodeCluster, *args: str, timeout: float = 200) -> None:
    result = cluster.kubectl(*args, timeout=timeout)
    if result.returncode != 0:
        raise HarnessError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")


def _kustomize_delete(cluster: RealNodeCluster) -> None:
    """docs/operator-guide.md#uninstall with kustomize: the webhook configurations, then the rest (the CRD stays)."""
    _kubectl(cluster, "delete", "-k", str(DEPLOY), "-l", ADMISSION_CONFIGURATION, "--timeout=180s")
    _kubectl(cluster, "delete", "-k", str(DEPLOY), "--ignore-not-found", "--timeout=180s")
    wait_removed(cluster)
    remove_recreated_role(cluster)


def _b64(data: str) -> bytes:
    return base64.b64decode(data)


def _secret(cluster: RealNodeCluster, name: str) -> dict[str, bytes]:
    return {k: _b64(v) for k, v in cluster.rest.get(f"{SECRETS}/{name}")["data"].items()}


def _serial(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


def _ca_bundles(cluster: RealNodeCluster) -> dict[str, list[bytes]]:
    """Each webhook's caBundle, decoded, in both webhook configurations."""
    bundles = {}
    for kind in ("mutating", "validating"):
        config = cluster.rest.get(f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/{WEBHOOK}")
        bundles[kind] = [_b64(h["clientConfig"].get("caBundle", "")) for h in config["webhooks"]]
    return bundles


def injected(ca: bytes) -> dict[str, list[bytes]]:
    """``ca`` in every webhook of both configurations: the mutating one has two (the MPIJob defaulter and the
    IndexedJob worker pods' rank label), the validating one one."""
    return {"mutating": [ca, ca], "validating": [ca]}


def _conversion_bundle(cluster: RealNodeCluster) -> bytes | None:
    webhook = cluster.rest.get(CRD_PATH)["spec"]["conversion"].get("webhook")
    return _b64(webhook["clientConfig"].get("caBundle", "")) if webhook else None


def _webhook_pods(cluster: RealNodeCluster) -> list[JSON]:
    pods: list[JSON] = cluster.rest.get(
        f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/name={WEBHOOK}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _served_serial(ip: str, ca: bytes) -> int:
    """The serial of the certificate the webhook at IP serves, verified against CA for the Service's name, as the
    API server verifies it."""
    context = ssl.create_default_context(cadata=ca.decode())
    with socket.create_connection((ip, WEBHOOK_PORT), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=SERVICE_NAME) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _served_serials(cluster: RealNodeCluster, ca: bytes) -> dict[str, int]:
    return {p["metadata"]["name"]: _served_serial(p["status"]["podIP"], ca) for p in _webhook_pods(cluster)}


def _ready(cluster: RealNodeCluster, name: str) -> bool:
    certificate = cluster.rest.get(f"{CERTIFICATES}/{name}")
    return condition(certificate, "Ready") == "True" and condition(certificate, "Issuing") is None


def test_certificates_issued_injected_and_a_job_runs(real_cluster: RealNodeCluster, release: Release,
                                                    namespace: str) -> None:
    print(f"\nhelm install (chart defaults, cert-manager): seconds to each step: {release.timings}")
    assert _ready(real_cluster, "mpijob-webhook-ca")
    assert _ready(real_cluster, "mpijob-webhook")
    ca_secret, tls = _secret(real_cluster, CA_SECRET), _secret(real_cluster, TLS_SECRET)
    ca = ca_secret["tls.crt"]
    assert ca_secret["ca.crt"] == ca, "the self-signed CA is its own issuer"
    assert tls["ca.crt"] == ca, "the CA Issuer puts its CA beside the serving pair"
    ca_cert, serving = x509.load_pem_x509_certificate(ca), x509.load_pem_x509_certificate(tls["tls.crt"])
    assert serving.issuer == ca_cert.subject
    assert serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == [WEBHOOK, f"{WEBHOOK}.{NAMESPACE}", SERVICE_NAME, f"{SERVICE_NAME}.cluster.local"]
    assert _ca_bundles(real_cluster) == injected(ca)
    assert _conversion_bundle(real_cluster) is None, "the chart's default CRD has no conversion webhook"
    assert set(_served_serials(real_cluster, ca).values()) == {serving.serial_number}

    # kubeflow.org/v2 on: cainjector fills the conversion webhook's caBundle from the same Certificate.
    began = time.monotonic()
    _helm(release, real_cluster, "upgrade", RELEASE, str(CHART), f"--namespace={RELEASE_NAMESPACE}", "--reuse-values",
          "--force-conflicts", "--set", "apiVersions.v2=true")
    release.v2 = True
    api_v2.wait_served(real_cluster, ["v2", "v2beta1"])
    crd = real_cluster.rest.get(CRD_PATH)
    assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{WEBHOOK}"
    wait_for(lambda: _conversion_bundle(real_cluster) == ca, 60, 0.2, what="the CRD's conversion caBundle injected")
    wait_for(lambda: real_cluster.kubectl("get", "mpijobs.v2.kubeflow.org", "--all-namespaces").returncode == 0,
             60, 0.5, what="kubeflow.org/v2 reads converted by the webhook pods")
    print(f"v2 on, its conversion caBundle injected and reads converted in {time.monotonic() - began:.1f} s")

    # Admitted: what the API server stores is the job as the webhook defaults it.
    job = upstream_pi("openmpi", "pi")
    dry = real_cluster.rest.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs?dryRun=All",
                                   copy.deepcopy(job))
    assert dry["spec"] == defaulted_dict(job)["spec"]
    assert dry["spec"] != job["spec"], "the example leaves fields for the webhook to default"
    log, took = run_to_success(real_cluster, namespace, job)
    assert_pi(log, ["pi-worker-0", "pi-worker-1"])
    print(f"pi with cert-manager's certificates: Succeeded in {took:.1f} s")


@dataclass
class Load:
    """Admissions and conversions in a loop, each request counted by kind and outcome."""

    cluster: RealNodeCluster
    namespace: str
    job: JSON
    done: threading.Event = field(default_factory=threading.Event)
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    rounds: int = 0

    def requests(self) -> dict[str, tuple[str, str, JSON | None]]:
        ns = self.namespace
        v2 = {**copy.deepcopy(self.job), "apiVersion": "kubeflow.org/v2"}
        return {
            "create v2beta1 (dry run)": ("POST", f"/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs?dryRun=All",
                                         copy.deepcopy(self.job)),
            "create v2 (dry run)": ("POST", f"/apis/kubeflow.org/v2/namespaces/{ns}/mpijobs?dryRun=All", v2),
            "list v2": ("GET", f"/apis/kubeflow.org/v2/namespaces/{ns}/mpijobs", None),
        }

    def run(self) -> None:
        expected = defaulted_dict(self.job)["spec"]
        while not self.done.is_set():
            for what, (method, path, body) in self.requests().items():
                try:
                    answer = self.cluster.rest.request(method, path, body)
                    if what == "create v2beta1 (dry run)" and answer["spec"] != expected:
                        raise AssertionError(f"not defaulted: {answer['spec']}")
                    if what == "list v2" and [i["apiVersion"] for i in answer["items"]] != ["kubeflow.org/v2"]:
                        raise AssertionError(f"not one job converted to v2: {answer['items']}")
                except (ApiError, OSError, AssertionError, KeyError) as err:
                    self.counts[f"{what}: failed"] += 1
                    self.failures.append(f"{datetime.now(UTC):%H:%M:%S.%f} {what}: {err}")
                else:
                    self.counts[f"{what}: ok"] += 1
            self.rounds += 1
            self.done.wait(0.05)


def test_forced_renewal_under_admission_load_fails_no_request(real_cluster: RealNodeCluster, release: Release,
                                                             namespace: str) -> None:
    assert release.v2, "the first test turned kubeflow.org/v2 on"
    ca = _secret(real_cluster, CA_SECRET)["tls.crt"]
    old = _serial(_secret(real_cluster, TLS_SECRET)["tls.crt"])
    pods = sorted(p["metadata"]["name"] for p in _webhook_pods(real_cluster))
    assert _served_serials(real_cluster, ca) == dict.fromkeys(pods, old)
    before = real_cluster.rest.get(f"{CERTIFICATES}/mpijob-webhook")
    # A job stored for the v2 reads to convert (suspended, managed elsewhere: nothing runs).
    real_cluster.rest.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", idle_mpijob("stored"))

    load = Load(real_cluster, namespace, upstream_pi("openmpi", "dry"))
    worker = threading.Thread(target=load.run, name="admission-load", daemon=True)
    worker.start()
    try:
        wait_for(lambda: load.rounds >= 5, 30, 0.1, what="the loop's first rounds")
        # What `cmctl renew` does: the Issuing condition set through the status subresource.
        began = time.monotonic()
        certificate = real_cluster.rest.get(f"{CERTIFICATES}/mpijob-webhook")
        certificate["status"]["conditions"] = [*certificate["status"].get("conditions", []), {
            "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "observedGeneration": certificate["metadata"]["generation"]}]
        real_cluster.rest.request("PUT", f"{CERTIFICATES}/mpijob-webhook/status", certificate)

        def renewed() -> int | None:
            serial = _serial(_secret(real_cluster, TLS_SECRET)["tls.crt"])
            return serial if serial != old else None

        new = wait_for(renewed, 60, 0.2, what="a new serving certificate in the Secret")
        issued = time.monotonic() - began
        wait_for(lambda: _ready(real_cluster, "mpijob-webhook"), 60, 0.2, what="the Certificate Ready, not Issuing")
        wait_for(lambda: _served_serials(real_cluster, ca) == dict.fromkeys(pods, new), DELIVERY_TIMEOUT, 1.0,
                 what="every webhook pod serving the new certificate")
        served = time.monotonic() - began
        switched = load.rounds
        wait_for(lambda: load.rounds >= switched + AFTER_SWITCH, 60, 0.1, what="the loop's rounds after the switch")
    finally:
        load.done.set()
        worker.join(timeout=30)
    after = real_cluster.rest.get(f"{CERTIFICATES}/mpijob-webhook")
    print(f"\nforced renewal: serial {old:x} -> {new:x}, in the Secret after {issued:.1f} s, served by "
          f"{len(pods)} pods after {served:.1f} s; {load.rounds} rounds: {dict(sorted(load.counts.items()))}")
    assert not worker.is_alive()
    assert load.failures == []
    assert load.counts == Counter({f"{what}: ok": load.rounds for what in load.requests()})
    assert after["status"]["revision"] == before["status"]["revision"] + 1
    assert _secret(real_cluster, TLS_SECRET)["ca.crt"] == ca
    assert _ca_bundles(real_cluster) == injected(ca)
    assert _conversion_bundle(real_cluster) == ca
    assert sorted(p["metadata"]["name"] for p in _webhook_pods(real_cluster)) == pods, "no pod restarted"


def test_kustomize_default_install_issues_and_injects(real_cluster: RealNodeCluster, release: Release,
                                                     namespace: str) -> None:
    """deploy/ as docs/operator-guide.md installs it with kustomize (its default: deploy/certs, cert-manager), in
    place of the release, then removed as the guide removes it."""
    _uninstall_release(real_cluster, release.helm)
    assert operator_objects(real_cluster) == {CRD}
    began = time.monotonic()
    try:
        apply_crd(real_cluster)
        _kubectl(real_cluster, "apply", "--server-side", "-k", str(DEPLOY), "-l",
                 "app.kubernetes.io/component!=admission-configuration")
        _kubectl(real_cluster, "-n", NAMESPACE, "rollout", "status", f"deployment/{WEBHOOK}", "deployment/mpi-operator",
                 "--timeout=180s")
        rolled_out = time.monotonic() - began
        _kubectl(real_cluster, "apply", "--server-side", "-k", str(DEPLOY))
        timings = {"rolled-out": rolled_out, **wait_ready(real_cluster, 120, began)}
        print(f"\nkubectl apply -k deploy/ (cert-manager): seconds to each step: {timings}")

        assert _ready(real_cluster, "mpijob-webhook-ca")
        assert _ready(real_cluster, "mpijob-webhook")
        ca, tls = _secret(real_cluster, CA_SECRET)["tls.crt"], _secret(real_cluster, TLS_SECRET)
        assert tls["ca.crt"] == ca
        assert _ca_bundles(real_cluster) == injected(ca)
        assert set(_served_serials(real_cluster, ca).values()) == {_serial(tls["tls.crt"])}
        job = upstream_pi("openmpi", "pi")
        dry = real_cluster.rest.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs?dryRun=All",
                                       copy.deepcopy(job))
        assert dry["spec"] == defaulted_dict(job)["spec"]
    finally:
        _kustomize_delete(real_cluster)
    assert operator_objects(real_cluster) == {CRD}
