"""The Helm chart deploy/chart/mpi-operator: its default values, with the images set (IMAGES: the chart refuses its
placeholders), render exactly the objects of `kubectl kustomize deploy/crds/` and `kubectl kustomize deploy/` with
the same images, the CRD with Helm's keep policy besides (so `helm uninstall` leaves it, as `kubectl delete -k
deploy/` does); apiVersions.v2 renders `kubectl kustomize deploy/crds-v2/`; each value changes exactly what it
should, and values.schema.json refuses bad values with a message naming the value. The pod knobs of both components
are in tests/unit/test_chart_pods.py.
Needs helm (hack/build/build-helm.sh, from the Go module proxy) and kubectl (the control-plane binaries); skipped,
saying why, without them."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import HarnessError
from hack.devcluster.binaries import find_bin_dir
from hack.devcluster.helm import CHART, HelmError, find_helm, helm, render_chart, value_flags
from hack.gen import chart as gen_chart

ROOT = Path(__file__).resolve().parents[2]
Doc = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
WEBHOOK = ("Deployment", "mpi-operator", "mpijob-webhook")
RECONCILER = ("Deployment", "mpi-operator", "mpi-operator")
MUTATING = ("MutatingWebhookConfiguration", "", "mpijob-webhook")
VALIDATING = ("ValidatingWebhookConfiguration", "", "mpijob-webhook")
NAMESPACE = ("Namespace", "", "mpi-operator")
LEASE_ROLES = (("Role", "mpi-operator", "mpi-operator-leader-election"),
               ("RoleBinding", "mpi-operator", "mpi-operator-leader-election"))
CERT_MANAGER = (("Issuer", "mpi-operator", "mpijob-selfsigned"), ("Issuer", "mpi-operator", "mpijob-ca"),
                ("Certificate", "mpi-operator", "mpijob-webhook-ca"), ("Certificate", "mpi-operator", "mpijob-webhook"))
TLS_SECRET = ("Secret", "mpi-operator", "mpijob-webhook-tls")
PRIORITY_CLASS = ("PriorityClass", "", "mpi-operator-critical")
CRD = ("CustomResourceDefinition", "", "mpijobs.kubeflow.org")
KEEP = {"helm.sh/resource-policy": "keep"}  # crds.keep (default true): `helm uninstall` leaves the CRD
POD = "spec.template.spec"
CONTAINER = "spec.template.spec.containers[0]"
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
# The images every render here is given, as `make images` prints them; the kustomize base's placeholders (which the
# chart refuses) are replaced by the same, as `kustomize edit set image` would (with_images).
IMAGES = {"webhook.image.repository": "registry.example.com/mpijob-webhook", "webhook.image.tag": "v0.1.0",
          "reconciler.image.repository": "registry.example.com/mpijob-reconciler", "reconciler.image.tag": "v0.1.0"}
KUSTOMIZE_IMAGES = {"mpijob-operator/webhook:dev": "registry.example.com/mpijob-webhook:v0.1.0",
                    "mpijob-operator/reconciler:dev": "registry.example.com/mpijob-reconciler:v0.1.0"}


@cache
def helm_binary() -> Path:
    try:
        return find_helm()
    except HarnessError as exc:
        pytest.skip(f"helm is not available: {exc}")


@cache
def kubectl() -> str:
    on_path = shutil.which("kubectl")
    if on_path:
        return on_path
    try:
        return str(find_bin_dir() / "kubectl")
    except HarnessError as exc:
        pytest.skip(f"kubectl (for `kubectl kustomize`) is not available: {exc}")


def by_key(objects: list[Doc]) -> dict[Key, Doc]:
    keyed = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}
    assert len(keyed) == len(objects), "two objects with the same kind, namespace and name"
    return keyed


def with_images(obj: Doc) -> Doc:
    """OBJ with the placeholder images of its pod template's containers replaced by KUSTOMIZE_IMAGES's."""
    if obj["kind"] != "Deployment":
        return obj
    out: Doc = json.loads(json.dumps(obj))
    for container in out["spec"]["template"]["spec"]["containers"]:
        container["image"] = KUSTOMIZE_IMAGES.get(container["image"], container["image"])
    return out


@cache
def kustomize(directory: str) -> dict[Key, Doc]:
    """The objects of `kubectl kustomize DIRECTORY` (relative to the checkout), the images those of IMAGES."""
    proc = subprocess.run([kubectl(), "kustomize", str(ROOT / directory)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return by_key([with_images(d) for d in yaml.safe_load_all(proc.stdout) if d])


def kept(objects: dict[Key, Doc]) -> dict[Key, Doc]:
    """OBJECTS with Helm's keep policy added to the CRD's annotations, as the chart renders it (crds.keep)."""
    crd = objects[CRD]
    annotations = {**(crd["metadata"].get("annotations") or {}), **KEEP}
    return {**objects, CRD: {**crd, "metadata": {**crd["metadata"], "annotations": annotations}}}


def kustomize_crds(directory: str = "deploy/crds") -> dict[Key, Doc]:
    """`kubectl kustomize DIRECTORY` (deploy/crds, or deploy/crds-v2 with v2 on) as the chart renders it."""
    return kept(kustomize(directory))


def kustomize_base() -> dict[Key, Doc]:
    """Both kustomize steps of an install: the CRD (deploy/crds/), then the operator (deploy/)."""
    crds, operator = kustomize_crds(), kustomize("deploy")
    assert not crds.keys() & operator.keys()
    return {**crds, **operator}


def render(flags: tuple[str, ...] = ()) -> dict[Key, Doc]:
    """The chart's objects with IMAGES and then FLAGS."""
    return by_key(render_chart(helm_binary(), (*value_flags(IMAGES), *flags)))


def template(*flags: str, command: str = "template") -> str:
    """`helm template x CHART` (or `helm lint --strict CHART`) with IMAGES and then FLAGS: its output."""
    args = ("lint", "--strict") if command == "lint" else ("template", "x")
    return helm(helm_binary(), *args, str(CHART), *value_flags(IMAGES), *flags)


@cache
def default_render() -> dict[Key, Doc]:
    return render()


def differences(old: Any, new: Any, path: str = "") -> Iterator[str]:
    """The paths (a.b[0].c) where NEW differs from OLD: a changed leaf, an added or removed key or item."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old or key not in new:
                yield sub
            else:
                yield from differences(old[key], new[key], sub)
    elif isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            if i >= len(old) or i >= len(new):
                yield f"{path}[{i}]"
            else:
                yield from differences(old[i], new[i], f"{path}[{i}]")
    elif old != new:
        yield path


def changes(before: dict[Key, Doc], after: dict[Key, Doc]) -> dict[Key, set[str]]:
    """Per object, what changed: {"(added)"} or {"(removed)"} for a whole object, else the changed paths."""
    out: dict[Key, set[str]] = {}
    for key in before.keys() | after.keys():
        if key not in after:
            out[key] = {"(removed)"}
        elif key not in before:
            out[key] = {"(added)"}
        elif paths := set(differences(before[key], after[key])):
            out[key] = paths
    return out


def test_chart_copies_of_the_base_are_up_to_date() -> None:
    assert gen_chart.main(["--check"]) == 0, "the chart's copies of deploy/ are stale: run `make chart`"


def test_the_chart_version_and_app_version_are_the_project_version() -> None:
    """One version source (RELEASE.md): pyproject.toml's, which `make chart` writes into Chart.yaml."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    version = gen_chart.project_version()
    assert (chart["version"], chart["appVersion"]) == (version, version)
    assert gen_chart.versioned_chart("version: 0.1.0\nappVersion: \"dev\"\nkubeVersion: x\n", "9.9.1") == (
        'version: 9.9.1\nappVersion: "9.9.1"\nkubeVersion: x\n')


def test_an_unset_image_tag_is_the_chart_app_version() -> None:
    """A release's chart (`make release`) sets only the repositories: the images are tagged with its appVersion."""
    objects = render(tuple(value_flags({"webhook.image.tag": "", "reconciler.image.tag": ""})))
    version = gen_chart.project_version()
    assert {key: objects[key]["spec"]["template"]["spec"]["containers"][0]["image"] for key in (WEBHOOK, RECONCILER)
            } == {WEBHOOK: f"registry.example.com/mpijob-webhook:{version}",
                  RECONCILER: f"registry.example.com/mpijob-reconciler:{version}"}


def test_default_values_render_the_kustomize_base_object_by_object() -> None:
    base, chart = kustomize_base(), default_render()
    assert sorted(chart) == sorted(base)
    differing = {key: sorted(differences(base[key], chart[key])) for key in base if base[key] != chart[key]}
    assert differing == {}, ("objects the chart renders differently from `kubectl kustomize deploy/crds/` and "
                             f"`kubectl kustomize deploy/`: {differing}")


def test_the_crd_is_a_template_kept_on_uninstall() -> None:
    """The CRD is a template (so that values can turn v2 on), not in crds/, which Helm never upgrades; Helm's keep
    policy makes `helm uninstall` leave it, as removing the operator with kubectl leaves deploy/crds/."""
    templates = by_key([d for d in yaml.safe_load_all(template()) if d])
    assert templates == default_render()
    assert [key for key in templates if key[0] == "CustomResourceDefinition"] == [CRD]
    assert templates[CRD]["metadata"]["annotations"] == KEEP
    assert not (CHART / "crds").exists()
    assert not [key for key in kustomize("deploy") if key[0] == "CustomResourceDefinition"]


def test_api_v2_renders_the_v2_overlay() -> None:
    """apiVersions.v2 renders the CRD of `kubectl kustomize deploy/crds-v2/` (the component deploy/components/api-v2:
    the v2 version, the conversion webhook, cert-manager's CA injection), and nothing else changes."""
    v2 = render(tuple(value_flags({"apiVersions.v2": "true"})))
    assert v2 == {**default_render(), **kustomize_crds("deploy/crds-v2")}
    assert [v["name"] for v in v2[CRD]["spec"]["versions"]] == ["v2beta1", "v2"]


@pytest.mark.parametrize("mode", ["manual", "managed"])
def test_api_v2_without_cert_manager(mode: str) -> None:
    """No cert-manager: no CA injection annotation; the conversion webhook gets the caBundle of certificates.manual
    (manual) or is left for the reconciler to fill (managed), as the webhook configurations are."""
    values = {"certificates.mode": mode, "apiVersions.v2": "true"}
    values |= {"certificates.manual.caBundle": CA_BUNDLE} if mode == "manual" else {}
    crd = render(tuple(value_flags(values)))[CRD]
    expected = kustomize_crds("deploy/crds-v2")[CRD]
    assert crd["metadata"]["annotations"] == KEEP
    client = {**expected["spec"]["conversion"]["webhook"]["clientConfig"],
              **({"caBundle": CA_BUNDLE} if mode == "manual" else {})}
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == client
    assert crd["spec"]["versions"] == expected["spec"]["versions"]


VALUE_CASES: list[tuple[str, dict[str, str], dict[Key, set[str]]]] = [
    ("webhook-image", {"webhook.image.repository": "registry.example.com/mpijob-webhook", "webhook.image.tag": "v1"},
     {WEBHOOK: {f"{CONTAINER}.image"}}),
    ("reconciler-digest", {"reconciler.image.digest": "sha256:" + "0a" * 32}, {RECONCILER: {f"{CONTAINER}.image"}}),
    ("placeholder-imported", {"webhook.image.repository": "mpijob-operator/webhook", "webhook.image.tag": "dev",
                              "webhook.imagePullPolicy": "Never"},
     {WEBHOOK: {f"{CONTAINER}.image", f"{CONTAINER}.imagePullPolicy"}}),
    ("reconciler-pull-policy", {"reconciler.imagePullPolicy": "Always"},
     {RECONCILER: {f"{CONTAINER}.imagePullPolicy"}}),
    ("webhook-replicas", {"webhook.replicas": "3"}, {WEBHOOK: {"spec.replicas"}}),
    ("reconciler-replicas", {"reconciler.replicas": "2"}, {RECONCILER: {"spec.replicas"}}),
    ("reconciler-memory", {"reconciler.resources.limits.memory": "1Gi"},
     {RECONCILER: {f"{CONTAINER}.resources.limits.memory"}}),
    ("webhook-cpu-limit", {"webhook.resources.limits.cpu": "1"}, {WEBHOOK: {f"{CONTAINER}.resources.limits.cpu"}}),
    ("pdb", {"webhook.minAvailable": "50%"}, {("PodDisruptionBudget", "mpi-operator", "mpijob-webhook"):
                                              {"spec.minAvailable"}}),
    ("webhook-existing-priority-class", {"webhook.priorityClassName": "high", "webhook.priorityClass.create": "false"},
     {WEBHOOK: {f"{POD}.priorityClassName"}, PRIORITY_CLASS: {"(removed)"}}),
    ("webhook-no-priority-class", {"webhook.priorityClassName": ""},
     {WEBHOOK: {f"{POD}.priorityClassName"}, PRIORITY_CLASS: {"(removed)"}}),
    ("webhook-priority-value", {"webhook.priorityClass.value": "100000"}, {PRIORITY_CLASS: {"value"}}),
    ("webhook-no-spread", {"webhook.topologySpreadConstraints": "null"},
     {WEBHOOK: {f"{POD}.topologySpreadConstraints"}}),
    ("threadiness", {"reconciler.threadiness": "4"}, {RECONCILER: {f"{CONTAINER}.args[2]"}}),
    ("qps-and-burst", {"reconciler.kubeApiQPS": "50", "reconciler.kubeApiBurst": "100"},
     {RECONCILER: {f"{CONTAINER}.args[2]", f"{CONTAINER}.args[3]"}}),
    ("gang-scheduling", {"reconciler.gangScheduling": "volcano"}, {RECONCILER: {f"{CONTAINER}.args[2]"}}),
    ("watched-namespace", {"reconciler.namespace": "team-a"}, {RECONCILER: {f"{CONTAINER}.args[2]"}}),
    ("cluster-domain", {"reconciler.clusterDomain": "cluster.local"},
     {RECONCILER: {f"{CONTAINER}.args[2]"}, WEBHOOK: {f"{CONTAINER}.args[6]"}}),
    ("log-format", {"reconciler.logFormat": "json"}, {RECONCILER: {f"{CONTAINER}.args[2]"}}),
    ("extra-args", {"reconciler.extraArgs[0]": "--max-concurrent-writes=32"}, {RECONCILER: {f"{CONTAINER}.args[2]"}}),
    ("monitoring-port", {"reconciler.monitoringPort": "9100"},
     {RECONCILER: {f"{CONTAINER}.args[1]", f"{CONTAINER}.ports[1].containerPort"}}),
    ("monitoring-off", {"reconciler.monitoringPort": "0"},
     {RECONCILER: {f"{CONTAINER}.args[1]", f"{CONTAINER}.ports[1]"}}),
    ("lock-namespace", {"reconciler.lockNamespace": "kube-system"},
     {RECONCILER: {f"{CONTAINER}.args[0]"}, **{key: {"(removed)"} for key in LEASE_ROLES},
      **{(kind, "kube-system", name): {"(added)"} for kind, _, name in LEASE_ROLES}}),
    ("validating-failure-policy", {"webhook.validatingFailurePolicy": "Ignore"},
     {VALIDATING: {"webhooks[0].failurePolicy"}}),
    ("mutating-failure-policy", {"webhook.mutatingFailurePolicy": "Fail"}, {MUTATING: {"webhooks[0].failurePolicy"}}),
    ("pod-security", {"namespace.podSecurity.enforce": "baseline", "namespace.podSecurity.audit": ""},
     {NAMESPACE: {"metadata.labels.pod-security.kubernetes.io/enforce",
                  "metadata.labels.pod-security.kubernetes.io/audit"}}),
    ("no-namespace", {"namespace.create": "false"}, {NAMESPACE: {"(removed)"}}),
    ("no-crd", {"crds.enabled": "false"}, {CRD: {"(removed)"}}),
    ("crd-not-kept", {"crds.keep": "false"}, {CRD: {"metadata.annotations"}}),
    ("api-v2", {"apiVersions.v2": "true"}, {CRD: {"metadata.annotations.cert-manager.io/inject-ca-from",
                                                   "spec.conversion", "spec.versions[1]"}}),
    ("manual-certificates", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE},
     {**{key: {"(removed)"} for key in CERT_MANAGER},
      MUTATING: {"metadata.annotations", "webhooks[0].clientConfig.caBundle", "webhooks[1].clientConfig.caBundle"},
      VALIDATING: {"metadata.annotations", "webhooks[0].clientConfig.caBundle"}}),
]


@pytest.mark.parametrize(("values", "expected"), [pytest.param(v, e, id=i) for i, v, e in VALUE_CASES])
def test_a_value_changes_exactly_what_it_should(values: dict[str, str], expected: dict[Key, set[str]]) -> None:
    assert changes(default_render(), render(tuple(value_flags(values)))) == expected


def test_reconciler_flags_are_rendered_as_the_reconciler_parses_them() -> None:
    values = {"reconciler.threadiness": "4", "reconciler.kubeApiQPS": "2.5", "reconciler.kubeApiBurst": "20",
              "reconciler.gangScheduling": "scheduler-plugins-scheduler", "reconciler.namespace": "team-a",
              "reconciler.clusterDomain": "cluster.local", "reconciler.logLevel": "debug"}
    container = render(tuple(value_flags(values)))[RECONCILER]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [
        "--lock-namespace=mpi-operator", "--monitoring-port=9090", "--namespace=team-a",
        "--cluster-domain=cluster.local", "--gang-scheduling=scheduler-plugins-scheduler", "--threadiness=4",
        "--kube-api-qps=2.5", "--kube-api-burst=20", "--log-level=debug"]


def test_namespace_selector_from_a_values_file(tmp_path: Path) -> None:
    """Helm merges a values file into the defaults: matchLabels added is ANDed with the default exclusions, and
    `matchExpressions: null` drops those."""
    labels = {"mpijobs.example.com/enabled": "true"}
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"webhook": {"namespaceSelector": {"matchLabels": labels}}}))
    added = render(tuple(value_flags(value_files=[values])))
    assert changes(default_render(), added) == {  # the pod webhook (webhooks[1]) too
        MUTATING: {"webhooks[0].namespaceSelector.matchLabels", "webhooks[1].namespaceSelector.matchLabels"},
        VALIDATING: {"webhooks[0].namespaceSelector.matchLabels"}}
    values.write_text(json.dumps({"webhook": {"namespaceSelector": {"matchLabels": labels, "matchExpressions": None}}}))
    replaced = render(tuple(value_flags(value_files=[values])))
    assert [hook["namespaceSelector"] for key in (MUTATING, VALIDATING) for hook in replaced[key]["webhooks"]] == [
        {"matchLabels": labels}] * 3


def test_manual_certificates_from_python_m_webhook_certs(tmp_path: Path) -> None:
    """The operator guide's manual path: the files of `python -m webhook.certs` given with --set-file."""
    subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(tmp_path)], check=True,
                   capture_output=True)
    rendered = render(tuple(value_flags({"certificates.mode": "manual"}, files={
        "certificates.manual.caBundle": tmp_path / "ca-bundle.b64",
        "certificates.manual.tlsCrt": tmp_path / "tls.crt", "certificates.manual.tlsKey": tmp_path / "tls.key"})))
    secret = rendered[TLS_SECRET]
    assert secret["type"] == "kubernetes.io/tls"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "tls.crt": (tmp_path / "tls.crt").read_text(), "tls.key": (tmp_path / "tls.key").read_text()}
    bundle = (tmp_path / "ca-bundle.b64").read_text().strip()
    assert base64.b64decode(bundle).decode() == (tmp_path / "ca.crt").read_text()
    assert [hook["clientConfig"]["caBundle"] for k in (MUTATING, VALIDATING) for hook in rendered[k]["webhooks"]] == [
        bundle] * 3


REJECTIONS: list[tuple[str, dict[str, str], list[str]]] = [
    ("certificate-mode", {"certificates.mode": "vault"},
     ["at '/certificates/mode': value must be one of 'cert-manager', 'managed', 'manual', 'builtIn', 'reconciler'"]),
    ("manual-without-ca", {"certificates.mode": "manual"},
     ["at '/certificates/manual/caBundle': minLength: got 0, want 1"]),
    ("certificate-without-key", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE,
                                 "certificates.manual.tlsCrt": "-----BEGIN CERTIFICATE-----"},
     ["at '/certificates/manual/tlsKey': minLength: got 0, want 1"]),
    ("built-in-alias-without-ca", {"certificates.mode": "builtIn"},
     ["at '/certificates/manual/caBundle': minLength: got 0, want 1"]),
    ("built-in-alias-without-any-values", {"certificates.mode": "builtIn", "certificates.manual": "null"},
     ["at '/certificates': missing property 'manual'"]),
    ("built-in-alias-certificate-without-key",
     {"certificates.mode": "builtIn", "certificates.builtIn.caBundle": CA_BUNDLE,
      "certificates.builtIn.tlsCrt": "-----BEGIN CERTIFICATE-----"},
     ["at '/certificates/builtIn': missing property 'tlsKey'"]),
    ("failure-policy", {"webhook.validatingFailurePolicy": "Never"},
     ["at '/webhook/validatingFailurePolicy': value must be one of 'Fail', 'Ignore'"]),
    ("pull-policy", {"reconciler.imagePullPolicy": "Sometimes"},
     ["at '/reconciler/imagePullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"]),
    ("no-webhook", {"webhook.replicas": "0"}, ["at '/webhook/replicas': minimum: got 0, want 1"]),
    ("system-priority", {"webhook.priorityClass.value": "2000000000"},
     ["at '/webhook/priorityClass/value': maximum: got 2\u00d710\u2070\u2079, want 1\u00d710\u2070\u2079"]),
    ("threadiness", {"reconciler.threadiness": "0"}, ["at '/reconciler/threadiness': minimum: got 0, want 1"]),
    ("qps-text", {"reconciler.kubeApiQPS": "fast"}, ["at '/reconciler/kubeApiQPS': 'fast' does not match pattern"]),
    ("port", {"reconciler.monitoringPort": "70000"},
     ["at '/reconciler/monitoringPort': maximum: got 70,000, want 65,535"]),
    ("lock-namespace", {"reconciler.lockNamespace": "Bad_NS"},
     ["at '/reconciler/lockNamespace': 'Bad_NS' does not match pattern"]),
    ("pod-security-level", {"namespace.podSecurity.enforce": "strict"},
     ["at '/namespace/podSecurity/enforce': value must be one of '', 'privileged', 'baseline', 'restricted'"]),
    ("misspelt-value", {"reconciler.threads": "4"}, ["at '/reconciler': additional properties 'threads' not allowed"]),
    ("numeric-tag", {"webhook.image.tag": "1"}, ["at '/webhook/image/tag': got number, want string"]),
    ("api-v2-text", {"apiVersions.v2": "yes"}, ["at '/apiVersions/v2': got string, want boolean"]),
    ("misspelt-crds", {"crds.install": "true"}, ["at '/crds': additional properties 'install' not allowed"]),
]


MODE_ALIASES: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("managed", {"certificates.mode": "managed"}, {"certificates.mode": "reconciler"}),
    ("managed-durations", {"certificates.mode": "managed", "certificates.reconciler.certDuration": "2m"},
     {"certificates.mode": "reconciler", "certificates.reconciler.certDuration": "2m"}),
    ("manual", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE},
     {"certificates.mode": "builtIn", "certificates.builtIn.caBundle": CA_BUNDLE}),
    ("manual-old-values", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE},
     {"certificates.mode": "manual", "certificates.builtIn.caBundle": CA_BUNDLE}),
    ("manual-new-values", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE},
     {"certificates.mode": "builtIn", "certificates.manual.caBundle": CA_BUNDLE}),
    # a release installed before certificates.manual existed: `helm upgrade --reuse-values` keeps its values,
    # without the chart's new defaults
    ("release-without-manual-values", {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE},
     {"certificates.mode": "builtIn", "certificates.manual": "null", "certificates.builtIn.caBundle": CA_BUNDLE}),
    ("manual-secret-v2-monitoring",
     {"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE, "apiVersions.v2": "true",
      "certificates.manual.tlsCrt": "-----BEGIN CERTIFICATE-----\nA", "certificates.manual.tlsKey":
      "-----BEGIN PRIVATE KEY-----\nB", "monitoring.serviceMonitor.enabled": "true"},
     {"certificates.mode": "builtIn", "certificates.builtIn.caBundle": CA_BUNDLE, "apiVersions.v2": "true",
      "certificates.builtIn.tlsCrt": "-----BEGIN CERTIFICATE-----\nA", "certificates.builtIn.tlsKey":
      "-----BEGIN PRIVATE KEY-----\nB", "monitoring.serviceMonitor.enabled": "true"}),
]


@pytest.mark.parametrize(("new", "deprecated"), [pytest.param(n, d, id=i) for i, n, d in MODE_ALIASES])
def test_a_deprecated_certificate_mode_renders_what_its_new_name_does(new: dict[str, str],
                                                                     deprecated: dict[str, str]) -> None:
    """certificates.mode builtIn is manual and reconciler is managed, certificates.builtIn.* is certificates.manual.*:
    the same objects, whole, and not those of the default (cert-manager)."""
    rendered = render(tuple(value_flags(new)))
    assert rendered == render(tuple(value_flags(deprecated)))
    assert rendered != default_render()


@pytest.mark.parametrize(("values", "messages"), [pytest.param(v, m, id=i) for i, v, m in REJECTIONS])
def test_schema_rejects_bad_values(values: dict[str, str], messages: list[str]) -> None:
    with pytest.raises(HelmError) as raised:
        template(*value_flags(values))
    assert all(message in str(raised.value) for message in messages), str(raised.value)


@pytest.mark.parametrize(("values", "messages"), [pytest.param(v, m, id=i) for i, v, m in REJECTIONS[:3]])
def test_lint_rejects_bad_values(values: dict[str, str], messages: list[str]) -> None:
    with pytest.raises(HelmError) as raised:
        template(*value_flags(values), command="lint")
    assert all(message in str(raised.value) for message in messages), str(raised.value)


def test_lint_passes_with_default_and_manual_values() -> None:
    for flags in ([], value_flags({"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE}),
                  value_flags({"certificates.mode": "builtIn", "certificates.builtIn.caBundle": CA_BUNDLE})):
        assert "0 chart(s) failed" in template(*flags, command="lint")
