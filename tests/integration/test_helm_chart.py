"""The Helm chart on a real API server: `helm install` creates every object the chart renders (the CRD included)
and the API server accepts them all, `helm upgrade` changes a value in place, and `helm uninstall` removes
everything but the CRD (crds.keep: Helm's keep policy), and the guide's clean-up the ClusterRole Kubernetes may
re-create (hack/devcluster/operator_deploy.py, remove_recreated_role). A CRD applied with kubectl before is
adopted as the guide says, and `helm upgrade` turns kubeflow.org/v2 on and off (apiVersions.v2).

The chart's webhook configurations and its cluster-wide objects have the names of the operator the other
integration tests deploy, so this test runs on a control plane of its own (one kwok node, no MPIJob CRD
beforehand), with the manual certificates of `python -m webhook.certs` (there is no cert-manager): certificates.mode
manual, and its deprecated alias builtIn (with certificates.builtIn.*) for the adoption test.
The images never run: kwok plays the pods.

A release may also live in the namespace mpi-operator itself, made beforehand (namespace.create=false): `helm
uninstall` then leaves the namespace and what an admin put there. A release of an earlier chart, whose values lack
the keys added since, is upgraded to this chart with `--reuse-values` (the earlier chart's values, without the new
defaults) and with `--reset-then-reuse-values` (the operator guide's advice for a new chart version): both give the
objects this chart renders from the same values.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import HarnessError, LocalCluster, api_v2, wait_for
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.helm import CHART, RELEASE, helm, release_objects, render_chart, value_flags
from hack.devcluster.operator_deploy import AGGREGATED_ROLE, CRDS, HELM_IMAGES, adopt_crd, remove_recreated_role

Doc = dict[str, Any]
CRD = "customresourcedefinition.apiextensions.k8s.io/mpijobs.kubeflow.org"
RECREATED = f"clusterrole.rbac.authorization.k8s.io/{AGGREGATED_ROLE}"


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(nodes=1, bin_dir=find_bin_dir()) as local:
        yield local


@pytest.fixture(scope="module")
def certificate_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("webhook-certs")
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(out)], check=True, capture_output=True)
    return {"certificates.manual.caBundle": out / "ca-bundle.b64", "certificates.manual.tlsCrt": out / "tls.crt",
            "certificates.manual.tlsKey": out / "tls.key"}


def resource(obj: Doc) -> str:
    """kubectl's kind.group/name for an object."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"


def get(cluster: LocalCluster, obj: Doc) -> Doc | None:
    """The object as stored, or None when the API server has no such object."""
    namespace = obj["metadata"].get("namespace")
    proc = cluster.kubectl("get", resource(obj), "-o", "json", *([f"--namespace={namespace}"] if namespace else []))
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return None
    stored: Doc = json.loads(proc.stdout)
    return stored


def test_install_upgrade_uninstall(own_cluster: LocalCluster, helm_binary: Path,
                                   certificate_files: dict[str, Path]) -> None:
    flags = value_flags({**HELM_IMAGES, "certificates.mode": "manual"}, files=certificate_files)
    rendered = render_chart(helm_binary, flags)
    kubeconfig = own_cluster.kubeconfig
    helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=default", *flags, kubeconfig=kubeconfig)

    missing = [resource(obj) for obj in rendered if get(own_cluster, obj) is None]
    assert missing == [], "objects the chart renders that the install did not create"
    bundle = certificate_files["certificates.manual.caBundle"].read_text().strip()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        proc = own_cluster.kubectl("get", kind, "mpijob-webhook", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
        assert proc.stdout == bundle

    helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reuse-values",
         "--set=reconciler.threadiness=4", kubeconfig=kubeconfig)
    reconciler = next(o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == "mpi-operator")
    stored = get(own_cluster, reconciler)
    assert stored is not None
    assert stored["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--lock-namespace=mpi-operator", "--monitoring-port=9090", "--threadiness=4"]

    helm(helm_binary, "uninstall", RELEASE, "--namespace=default", kubeconfig=kubeconfig)

    def remaining() -> list[str]:
        return [resource(obj) for obj in rendered if get(own_cluster, obj) is not None]

    # The namespace goes once its controller has emptied it; the rest is deleted at once, but for the empty
    # kubeflow-mpijobs-admin that kube-controller-manager may re-create, which the guide's uninstall deletes next.
    wait_for(lambda: set(remaining()) <= {CRD, RECREATED}, timeout=120,
             what="everything the chart made but the CRD to be deleted")
    remove_recreated_role(own_cluster)
    assert remaining() == [CRD]


def test_only_the_empty_recreated_role_is_cleaned_up(own_cluster: LocalCluster) -> None:
    """remove_recreated_role deletes kubeflow-mpijobs-admin as the aggregation controller re-creates it (no labels,
    aggregationRule or rules) and refuses to touch any other kubeflow-mpijobs-admin."""
    def role(**metadata: Any) -> str:
        return json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": AGGREGATED_ROLE, **metadata}})

    own_cluster.kubectl("create", "-f", "-", input=role(), check=True)
    assert remove_recreated_role(own_cluster) is True
    assert remove_recreated_role(own_cluster) is False
    labelled = role(labels={"app.kubernetes.io/part-of": "mpijob-operator"})
    own_cluster.kubectl("create", "-f", "-", input=labelled, check=True)
    try:
        with pytest.raises(HarnessError, match="is still there"):
            remove_recreated_role(own_cluster)
    finally:
        own_cluster.kubectl("delete", "clusterrole", AGGREGATED_ROLE, check=True)


def serving(cluster: LocalCluster, versions: list[str]) -> bool:
    return api_v2.served_versions(cluster) == versions


def test_an_existing_crd_is_adopted_and_v2_turned_on_and_off(own_cluster: LocalCluster, helm_binary: Path,
                                                             certificate_files: dict[str, Path]) -> None:
    """The CRD applied with kubectl (the kustomize path, or an earlier chart's crds/): `helm install` refuses it
    until it is adopted (docs/operator-guide.md#with-helm); then apiVersions.v2 adds v2 and the conversion webhook
    with the manual mode's caBundle, and takes them away again; `helm uninstall` leaves the CRD. The values are the
    deprecated aliases (certificates.mode=builtIn, certificates.builtIn.*), which still work."""
    kubeconfig = own_cluster.kubeconfig
    own_cluster.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", check=True)
    own_cluster.kubectl("apply", "--server-side", "-k", str(CRDS), check=True)
    deprecated = {key.replace(".manual.", ".builtIn."): path for key, path in certificate_files.items()}
    flags = value_flags({**HELM_IMAGES, "certificates.mode": "builtIn"}, files=deprecated)
    with pytest.raises(HarnessError, match="invalid ownership metadata"):
        helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=default", *flags, kubeconfig=kubeconfig)
    assert adopt_crd(own_cluster)
    helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=default", *flags, kubeconfig=kubeconfig)
    try:
        assert api_v2.served_versions(own_cluster) == ["v2beta1"]
        bundle = certificate_files["certificates.manual.caBundle"].read_text().strip()
        for v2, served in (("true", ["v2", "v2beta1"]), ("false", ["v2beta1"])):
            # --force-conflicts: spec.versions, one atomic field, is co-owned by kubectl's apply before the adoption
            helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reuse-values",
                 "--force-conflicts", f"--set=apiVersions.v2={v2}", kubeconfig=kubeconfig)
            wait_for(functools.partial(serving, own_cluster, served), timeout=30, what=f"kubeflow.org serving {served}")
            conversion = own_cluster.rest.get(api_v2.CRD_PATH)["spec"]["conversion"]
            assert conversion == ({"strategy": "None"} if v2 == "false" else {
                "strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
                    "caBundle": bundle, "service": {"name": "mpijob-webhook", "namespace": "mpi-operator",
                                                    "path": "/convert", "port": 443}}}})
    finally:
        helm(helm_binary, "uninstall", RELEASE, "--namespace=default", kubeconfig=kubeconfig)
        wait_for(lambda: not own_cluster.rest.get("/api/v1/namespaces?fieldSelector=metadata.name=mpi-operator")[
            "items"], timeout=120, what="the namespace mpi-operator deleted")
        remove_recreated_role(own_cluster)
    assert api_v2.served_versions(own_cluster) == ["v2beta1"]  # the CRD left by helm uninstall


def webhook_certs(out: Path, *args: str) -> Path:
    """`python -m webhook.certs --out-dir OUT ARGS`: OUT."""
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(out), *args], check=True,
                   capture_output=True)
    return out


def ca_bundles(cluster: LocalCluster) -> list[str]:
    """The caBundle of the mutating and the validating webhook configuration and of the CRD's conversion webhook."""
    bundles = [cluster.kubectl("get", kind, "mpijob-webhook", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}",
                               check=True).stdout
               for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")]
    conversion = cluster.rest.get(api_v2.CRD_PATH)["spec"]["conversion"]
    return [*bundles, conversion["webhook"]["clientConfig"]["caBundle"]]


def tls_secret(cluster: LocalCluster) -> dict[str, str]:
    """The data of the Secret mpijob-webhook-tls, decoded."""
    proc = cluster.kubectl("-n", "mpi-operator", "get", "secret", "mpijob-webhook-tls", "-o", "json", check=True)
    data: dict[str, str] = json.loads(proc.stdout)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def test_manual_certificates_are_renewed_through_values(own_cluster: LocalCluster, helm_binary: Path,
                                                       certificate_files: dict[str, Path], tmp_path: Path) -> None:
    """The operator guide's "Renewing manual certificates", on a release installed with the deprecated values
    (certificates.mode=builtIn, certificates.builtIn.*, no certificates.manual: a release from before it, whose values
    `--reuse-values` keeps): a serving certificate of the same CA, then a new CA through a caBundle of both CAs, each
    a `helm upgrade --reuse-values --set-file certificates.manual.*`, which wins over certificates.builtIn.*."""
    kubeconfig = own_cluster.kubeconfig
    own_cluster.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", check=True)
    deprecated = {key.replace(".manual.", ".builtIn."): path for key, path in certificate_files.items()}
    install = value_flags({**HELM_IMAGES, "certificates.mode": "builtIn", "certificates.manual": "null",
                           "apiVersions.v2": "true"}, files=deprecated)
    old = certificate_files["certificates.manual.tlsCrt"].parent
    renewed = tmp_path / "webhook-certs"
    renewed.mkdir()
    for name in ("ca.crt", "ca.key"):
        (renewed / name).write_bytes((old / name).read_bytes())
    webhook_certs(renewed, "--reuse-ca")
    new_ca = webhook_certs(tmp_path / "webhook-certs-new")
    two_cas = tmp_path / "two-cas.b64"
    two_cas.write_text(base64.b64encode(((new_ca / "ca.crt").read_text() + (old / "ca.crt").read_text()).encode())
                       .decode())

    def upgrade(**files: Path) -> None:
        helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reuse-values",
             *value_flags(files={f"certificates.manual.{key}": path for key, path in files.items()}),
             kubeconfig=kubeconfig)

    def pair(directory: Path) -> dict[str, str]:
        return {"tls.crt": (directory / "tls.crt").read_text(), "tls.key": (directory / "tls.key").read_text()}

    helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=default", *install, kubeconfig=kubeconfig)
    try:
        old_bundle = (old / "ca-bundle.b64").read_text().strip()
        assert (tls_secret(own_cluster), ca_bundles(own_cluster)) == (pair(old), [old_bundle] * 3)
        upgrade(tlsCrt=renewed / "tls.crt", tlsKey=renewed / "tls.key")
        assert (tls_secret(own_cluster), ca_bundles(own_cluster)) == (pair(renewed), [old_bundle] * 3)
        upgrade(caBundle=two_cas)
        assert (tls_secret(own_cluster), ca_bundles(own_cluster)) == (pair(renewed), [two_cas.read_text()] * 3)
        upgrade(tlsCrt=new_ca / "tls.crt", tlsKey=new_ca / "tls.key")
        assert (tls_secret(own_cluster), ca_bundles(own_cluster)) == (pair(new_ca), [two_cas.read_text()] * 3)
        upgrade(caBundle=new_ca / "ca-bundle.b64")
        new_bundle = (new_ca / "ca-bundle.b64").read_text().strip()
        assert (tls_secret(own_cluster), ca_bundles(own_cluster)) == (pair(new_ca), [new_bundle] * 3)
    finally:
        helm(helm_binary, "uninstall", RELEASE, "--namespace=default", kubeconfig=kubeconfig)
        wait_for(lambda: not own_cluster.rest.get("/api/v1/namespaces?fieldSelector=metadata.name=mpi-operator")[
            "items"], timeout=120, what="the namespace mpi-operator deleted")
        remove_recreated_role(own_cluster)


def namespace_gone(cluster: LocalCluster, name: str) -> bool:
    return not cluster.rest.get(f"/api/v1/namespaces?fieldSelector=metadata.name={name}")["items"]


def test_a_release_in_mpi_operator_leaves_the_namespace_on_uninstall(own_cluster: LocalCluster, helm_binary: Path,
                                                                   certificate_files: dict[str, Path]) -> None:
    """docs/operator-guide.md#with-helm: the namespace made beforehand with its labels, the release installed in it
    with namespace.create=false (the CRD left by an earlier release adopted for this one): `helm list -n
    mpi-operator` shows it, and `helm uninstall` deletes everything the chart made but the CRD, leaving the
    namespace with its labels and the pull Secret an admin put there."""
    kubeconfig = own_cluster.kubeconfig
    wait_for(lambda: namespace_gone(own_cluster, "mpi-operator"), timeout=120, what="no namespace mpi-operator")
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")}
    own_cluster.kubectl("create", "namespace", "mpi-operator", check=True)
    own_cluster.kubectl("label", "namespace", "mpi-operator", *(f"{k}={v}" for k, v in labels.items()), check=True)
    own_cluster.kubectl("-n", "mpi-operator", "create", "secret", "docker-registry", "regcred",
                        "--docker-server=registry.example.com", "--docker-username=u", "--docker-password=p",
                        check=True)
    adopt_crd(own_cluster, namespace="mpi-operator")
    flags = value_flags({**HELM_IMAGES, "certificates.mode": "manual", "namespace.create": "false",
                         "webhook.imagePullSecrets[0].name": "regcred",
                         "reconciler.imagePullSecrets[0].name": "regcred"}, files=certificate_files)
    rendered = render_chart(helm_binary, ["--namespace=mpi-operator", *flags])
    assert not [o for o in rendered if o["kind"] == "Namespace"]
    helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=mpi-operator", *flags, kubeconfig=kubeconfig)
    try:
        assert helm(helm_binary, "list", "--namespace=mpi-operator", "--short", kubeconfig=kubeconfig).split() == [
            RELEASE]
        assert [resource(obj) for obj in rendered if get(own_cluster, obj) is None] == []
        for name in ("mpijob-webhook", "mpi-operator"):
            dep = own_cluster.rest.get(f"/apis/apps/v1/namespaces/mpi-operator/deployments/{name}")
            assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    finally:
        helm(helm_binary, "uninstall", RELEASE, "--namespace=mpi-operator", kubeconfig=kubeconfig)
    wait_for(lambda: {resource(obj) for obj in rendered if get(own_cluster, obj) is not None} <= {CRD, RECREATED},
             timeout=120, what="everything the chart made but the CRD deleted")
    remove_recreated_role(own_cluster)
    namespace = own_cluster.rest.get("/api/v1/namespaces/mpi-operator")
    assert {k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith("pod-security")} == labels
    secrets = own_cluster.rest.get("/api/v1/namespaces/mpi-operator/secrets")["items"]
    assert [s["metadata"]["name"] for s in secrets] == ["regcred"]
    own_cluster.kubectl("delete", "namespace", "mpi-operator", check=True, timeout=120)
    adopt_crd(own_cluster)  # back to the release namespace of the other tests


# The keys of values.yaml added with the pod values: a chart from before them is this one without them.
NEWER_KEYS = {"webhook": ["imagePullSecrets", "podAnnotations", "podLabels", "nodeSelector", "tolerations",
                          "affinity", "podSecurityContext", "containerSecurityContext", "logLevel", "logFormat",
                          "extraArgs", "extraEnv"],
              "reconciler": ["imagePullSecrets", "priorityClassName", "podAnnotations", "podLabels", "nodeSelector",
                             "tolerations", "affinity", "podSecurityContext", "containerSecurityContext", "extraEnv"]}


def earlier_chart(out: Path) -> Path:
    """This chart without the values added with the pod values (NEWER_KEYS, image.digest and rbac) in its
    values.yaml: the defaults of the chart version a release of before was installed with."""
    chart = out / "mpi-operator"
    shutil.copytree(CHART, chart)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    for component, keys in NEWER_KEYS.items():
        for name in keys:
            del values[component][name]
        del values[component]["image"]["digest"]
    del values["rbac"]
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    return chart


def test_a_release_of_an_earlier_chart_upgrades_with_either_reuse_flag(own_cluster: LocalCluster, helm_binary: Path,
                                                                       certificate_files: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """`helm upgrade --reuse-values` to this chart keeps the earlier chart's values, without this chart's new
    defaults: the release's objects are still exactly those this chart renders from the same values (the
    securityContexts of deploy/ included). `--reset-then-reuse-values` takes this chart's defaults, then the
    release's values, then the flags given: the same objects again, with the flag's change."""
    kubeconfig = own_cluster.kubeconfig
    wait_for(lambda: namespace_gone(own_cluster, "mpi-operator"), timeout=120, what="no namespace mpi-operator")
    adopt_crd(own_cluster)
    flags = value_flags({**HELM_IMAGES, "certificates.mode": "manual"}, files=certificate_files)
    helm(helm_binary, "install", RELEASE, str(earlier_chart(tmp_path)), "--namespace=default", *flags,
         kubeconfig=kubeconfig)

    def release() -> list[Doc]:
        return sorted(release_objects(helm_binary, kubeconfig), key=lambda o: (o["kind"], o["metadata"]["name"]))

    def chart(*more: str) -> list[Doc]:
        return sorted(render_chart(helm_binary, [*flags, *more]), key=lambda o: (o["kind"], o["metadata"]["name"]))

    try:
        helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reuse-values",
             kubeconfig=kubeconfig)
        assert release() == chart()
        json_logs = value_flags({"webhook.logFormat": "json"})
        helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reset-then-reuse-values",
             *json_logs, kubeconfig=kubeconfig)
        assert release() == chart(*json_logs)
        webhook = own_cluster.rest.get("/apis/apps/v1/namespaces/mpi-operator/deployments/mpijob-webhook")
        assert webhook["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--log-format=json"
    finally:
        helm(helm_binary, "uninstall", RELEASE, "--namespace=default", kubeconfig=kubeconfig)
        wait_for(lambda: namespace_gone(own_cluster, "mpi-operator"), timeout=120,
                 what="the namespace mpi-operator deleted")
        remove_recreated_role(own_cluster)


def test_a_newer_crd_over_the_one_helm_installed_needs_force_conflicts(own_cluster: LocalCluster, helm_binary: Path,
                                                                      certificate_files: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    """The CRD made yours after a release installed it (`helm upgrade --set crds.enabled=false`: the keep policy
    leaves it): Helm's field manager still owns its fields, so `kubectl apply --server-side` of a newer CRD is
    refused with a conflict on spec.versions (one atomic field) until `--force-conflicts`, as NOTES.txt and the
    operator guide's upgrade step say; then the newer CRD is stored."""
    kubeconfig = own_cluster.kubeconfig
    wait_for(lambda: namespace_gone(own_cluster, "mpi-operator"), timeout=120, what="no namespace mpi-operator")
    own_cluster.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", check=True)
    flags = value_flags({**HELM_IMAGES, "certificates.mode": "manual"}, files=certificate_files)
    helm(helm_binary, "install", RELEASE, str(CHART), "--namespace=default", *flags, kubeconfig=kubeconfig)
    try:
        helm(helm_binary, "upgrade", RELEASE, str(CHART), "--namespace=default", "--reuse-values",
             "--set=crds.enabled=false", kubeconfig=kubeconfig)
        stored = own_cluster.rest.get(api_v2.CRD_PATH)
        assert stored["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        newer = own_cluster.kubectl("kustomize", str(CRDS), check=True).stdout
        crd = yaml.safe_load(newer)
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        schema["description"] = "MPIJob, as a newer CRD describes it."
        path = tmp_path / "newer-crd.yaml"
        path.write_text(yaml.safe_dump(crd))
        refused = own_cluster.kubectl("apply", "--server-side", "-f", str(path))
        assert refused.returncode != 0
        conflict = 'Apply failed with 1 conflict: conflict with "helm": .spec.versions'
        assert conflict in refused.stderr, refused.stderr
        own_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path), check=True)
        stored = own_cluster.rest.get(api_v2.CRD_PATH)
        assert stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] == schema["description"]
    finally:
        helm(helm_binary, "uninstall", RELEASE, "--namespace=default", kubeconfig=kubeconfig)
        wait_for(lambda: namespace_gone(own_cluster, "mpi-operator"), timeout=120,
                 what="the namespace mpi-operator deleted")
        remove_recreated_role(own_cluster)
        own_cluster.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", check=True)
