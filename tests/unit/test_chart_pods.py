"""The Helm chart's pod knobs, the same for both components (values.yaml webhook.* and reconciler.*): image digests,
imagePullSecrets, pod annotations and labels, nodeSelector, tolerations, affinity, the pod's and the container's
securityContext (OpenShift's restricted SCC: the fixed IDs dropped), extraEnv, and the webhook's logLevel, logFormat
and extraArgs; each Deployment with every knob set is compared whole with the object expected. Also what the chart
refuses with a message saying what to do (a release namespace it cannot honour, its placeholder images, a
PodDisruptionBudget that allows no eviction), Kubernetes' aggregation labels on the user roles
(rbac.aggregateToDefaultRoles), `global` (the chart as a subchart), NOTES.txt, and a release whose values predate
these knobs (`helm upgrade --reuse-values` keeps them without the new defaults), which renders what it did.
Needs helm, as tests/unit/test_chart.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hack.devcluster.helm import CHART, HelmError, helm, value_flags
from tests.unit.test_chart import (
    CA_BUNDLE,
    IMAGES,
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Doc,
    Key,
    changes,
    default_render,
    helm_binary,
    render,
    template,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4
EDIT_ROLE: Key = ("ClusterRole", "", "kubeflow-mpijobs-edit")
VIEW_ROLE: Key = ("ClusterRole", "", "kubeflow-mpijobs-view")
ADMIN_ROLE: Key = ("ClusterRole", "", "kubeflow-mpijobs-admin")
# docs/operator-guide.md, "OpenShift": the platform picks the UID and the fsGroup from the namespace's range.
OPENSHIFT = {component: {"podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": None},
                         "containerSecurityContext": {"runAsUser": None}} for component in ("webhook", "reconciler")}
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
TOLERATIONS = [{"key": "example.com/dedicated", "operator": "Equal", "value": "operators", "effect": "NoSchedule"}]
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}}
ENV = [{"name": "PROMETHEUS_DISABLE_CREATED_SERIES", "value": "True"},
       {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def every_knob(component: str) -> dict[str, Any]:
    """COMPONENT's values with every pod knob set (OpenShift's securityContexts among them)."""
    values: dict[str, Any] = {
        "image": {"digest": DIGEST}, "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/team": "hpc", "sidecar.istio.io/inject": "true"},
        # the selector's label is the chart's: a podLabels entry cannot change it
        "podLabels": {"example.com/cost-center": "42", "app.kubernetes.io/name": "other"},
        "nodeSelector": {"example.com/pool": "operators"}, "tolerations": TOLERATIONS, "affinity": AFFINITY,
        **OPENSHIFT[component], "extraEnv": ENV}
    if component == "webhook":
        values |= {"logLevel": "debug", "logFormat": "json", "extraArgs": ["--max-concurrent-conversions=2"]}
    else:
        values |= {"priorityClassName": "mpi-operator-critical", "logFormat": "json"}
    return values


def values_file(tmp_path: Path, values: dict[str, Any]) -> tuple[str, ...]:
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values))
    return tuple(value_flags(value_files=[path]))


def with_pod(deployment: Doc, pod: dict[str, Any], container: dict[str, Any], metadata: dict[str, Any]) -> Doc:
    """DEPLOYMENT with POD's fields set in its pod spec, CONTAINER's in its container, METADATA's in its pod
    template's metadata (a None value removes the field)."""
    out = copy.deepcopy(deployment)
    template_ = out["spec"]["template"]
    for target, fields in ((template_["metadata"], metadata), (template_["spec"], pod),
                           (template_["spec"]["containers"][0], container)):
        for key, value in fields.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
    return out


@pytest.mark.parametrize("component", ["webhook", "reconciler"])
def test_every_pod_knob_renders_the_expected_deployment(component: str, tmp_path: Path) -> None:
    rendered = render(values_file(tmp_path, {component: every_knob(component)}))
    key = WEBHOOK if component == "webhook" else RECONCILER
    default = default_render()[key]
    labels = default["spec"]["template"]["metadata"]["labels"]
    container = default["spec"]["template"]["spec"]["containers"][0]
    repository = IMAGES[f"{component}.image.repository"]
    flags = (["--log-level=debug", "--log-format=json", "--max-concurrent-conversions=2"] if component == "webhook"
             else ["--log-format=json"])
    expected = with_pod(
        default,
        pod={"imagePullSecrets": [{"name": "regcred"}], "nodeSelector": {"example.com/pool": "operators"},
             "tolerations": TOLERATIONS, "affinity": AFFINITY, "securityContext": RESTRICTED_POD,
             **({"priorityClassName": "mpi-operator-critical"} if component == "reconciler" else {})},
        container={"image": f"{repository}@{DIGEST}", "args": [*container["args"], *flags], "env": ENV,
                   "securityContext": RESTRICTED_CONTAINER},
        metadata={"labels": {**labels, "example.com/cost-center": "42"},
                  "annotations": {"example.com/team": "hpc", "sidecar.istio.io/inject": "true"}})
    assert rendered[key] == expected
    assert changes(default_render(), rendered).keys() == {key}


def test_the_default_security_contexts_are_deploys() -> None:
    """Pod Security "restricted", the fixed IDs 65532, the webhook's fsGroup for its Secret files (mode 0440)."""
    pods = {key: default_render()[key]["spec"]["template"]["spec"] for key in (WEBHOOK, RECONCILER)}
    ids = {"runAsUser": 65532, "runAsGroup": 65532}
    assert {key: pod["securityContext"] for key, pod in pods.items()} == {
        WEBHOOK: {**RESTRICTED_POD, **ids, "fsGroup": 65532}, RECONCILER: {**RESTRICTED_POD, **ids}}
    assert {key: pod["containers"][0]["securityContext"] for key, pod in pods.items()} == {
        key: {**RESTRICTED_CONTAINER, "runAsUser": 65532} for key in (WEBHOOK, RECONCILER)}


def test_openshift_values_leave_the_ids_to_the_platform(tmp_path: Path) -> None:
    """The operator guide's OpenShift values: no runAsUser, runAsGroup or fsGroup in any pod or container, the
    rest of "restricted" kept, and nothing else changed."""
    rendered = render(values_file(tmp_path, OPENSHIFT))
    expected = {key: with_pod(default_render()[key], pod={"securityContext": RESTRICTED_POD},
                              container={"securityContext": RESTRICTED_CONTAINER}, metadata={})
                for key in (WEBHOOK, RECONCILER)}
    assert {key: rendered[key] for key in expected} == expected
    assert changes(default_render(), rendered).keys() == expected.keys()


NEW_KEYS = [f"{component}.{key}" for component in ("webhook", "reconciler") for key in (
    "image.digest", "imagePullSecrets", "podAnnotations", "podLabels", "nodeSelector", "tolerations", "affinity",
    "podSecurityContext", "containerSecurityContext", "extraEnv")] + [
    "webhook.logLevel", "webhook.logFormat", "webhook.extraArgs", "reconciler.priorityClassName", "rbac"]


def test_a_release_whose_values_predate_the_pod_knobs_renders_what_it_did() -> None:
    """`helm upgrade --reuse-values` of a release installed with an earlier chart keeps that chart's values, without
    the keys added since (a key set to null is removed from the values, as if it had never been there): the
    objects are those of today's defaults, the securityContexts of deploy/ included."""
    assert render(tuple(value_flags({key: "null" for key in NEW_KEYS}))) == default_render()


def test_the_standard_aggregation_labels_are_an_option() -> None:
    """rbac.aggregateToDefaultRoles: kubeflow-mpijobs-edit aggregates into admin and edit, -view into view, and
    kubeflow-mpijobs-admin (an aggregation itself) into nothing more; upstream's Kubeflow labels stay."""
    rendered = render(tuple(value_flags({"rbac.aggregateToDefaultRoles": "true"})))
    assert changes(default_render(), rendered) == {
        EDIT_ROLE: {"metadata.labels.rbac.authorization.k8s.io/aggregate-to-admin",
                    "metadata.labels.rbac.authorization.k8s.io/aggregate-to-edit"},
        VIEW_ROLE: {"metadata.labels.rbac.authorization.k8s.io/aggregate-to-view"}}
    assert rendered[EDIT_ROLE]["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "mpijob-operator",
        "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit": "true",
        "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-mpijobs-admin": "true",
        "rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    assert rendered[VIEW_ROLE]["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "mpijob-operator",
        "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-view": "true",
        "rbac.authorization.k8s.io/aggregate-to-view": "true"}
    assert rendered[ADMIN_ROLE] == default_render()[ADMIN_ROLE]


def test_as_a_subchart_global_and_enabled_are_accepted() -> None:
    """A parent chart passes `global` (and its condition's `enabled`) to every subchart; the schema allows them and
    they change nothing."""
    rendered = render(tuple(value_flags({"global.imageRegistry": "registry.example.com", "enabled": "true"})))
    assert rendered == default_render()


def test_the_release_in_mpi_operator_with_the_namespace_made_beforehand() -> None:
    """`helm install -n mpi-operator --create-namespace --set namespace.create=false`: the release's record lives
    with the objects (`helm list -n mpi-operator`), and the chart leaves the namespace alone."""
    rendered = render(("--namespace=mpi-operator", *value_flags({"namespace.create": "false"})))
    assert changes(default_render(), rendered) == {NAMESPACE: {"(removed)"}}


REFUSALS: list[tuple[str, tuple[str, ...], list[str]]] = [
    ("placeholder-webhook-image", ("--set=webhook.image.repository=mpijob-operator/webhook",),
     ["webhook.image.repository is the placeholder mpijob-operator/webhook, which no registry serves (its pods "
      "would stay in ErrImagePull): set webhook.image.repository and webhook.image.tag (or .digest) to the image you "
      "pushed (`make images` prints the flags), or webhook.imagePullPolicy=Never for an image imported into every "
      "node by hand"]),
    ("placeholder-reconciler-image", ("--set=reconciler.image.repository=mpijob-operator/reconciler",
                                      "--set=reconciler.image.digest=" + DIGEST),
     ["reconciler.image.repository is the placeholder mpijob-operator/reconciler"]),
    ("release-namespace", ("--namespace=operators",),
     ['the release namespace is "operators", but the chart\'s objects always go to the namespace mpi-operator (the '
      "reconciler's certificates and the CRD's conversion webhook name it): install the release in mpi-operator "
      "(helm install -n mpi-operator --create-namespace --set namespace.create=false) or in default"]),
    ("namespace-of-the-release-created", ("--namespace=mpi-operator",),
     ["the release is in the namespace mpi-operator, which exists before the release (it holds its record): set "
      "namespace.create=false"]),
    ("budget-without-eviction", ("--set=webhook.replicas=1",),
     ["webhook.minAvailable (1) keeps all 1 webhook replicas: the PodDisruptionBudget allows no eviction, so every "
      "node drain would block on the webhook; raise webhook.replicas or lower webhook.minAvailable (0 allows every "
      "eviction)"]),
    ("budget-percentage", ("--set=webhook.replicas=3", "--set=webhook.minAvailable=67%"),
     ["webhook.minAvailable (67%) keeps all 3 webhook replicas"]),
    ("digest", ("--set=webhook.image.digest=sha256:abc",),
     ["at '/webhook/image/digest': 'sha256:abc' does not match pattern"]),
    ("pull-secret-name", ("--set=reconciler.imagePullSecrets[0]=regcred",),
     ["at '/reconciler/imagePullSecrets/0': got string, want object"]),
    ("security-context-misspelt", ("--set=webhook.podSecurityContext.runAsUserID=1000",),
     ["at '/webhook/podSecurityContext': additional properties 'runAsUserID' not allowed"]),
    ("log-format", ("--set=webhook.logFormat=text",),
     ["at '/webhook/logFormat': value must be one of '', 'logfmt', 'json'"]),
    ("env-without-name", ("--set=reconciler.extraEnv[0].value=1",),
     ["at '/reconciler/extraEnv/0': missing property 'name'"]),
    ("aggregation-text", ("--set=rbac.aggregateToDefaultRoles=yes",),
     ["at '/rbac/aggregateToDefaultRoles': got string, want boolean"]),
]


@pytest.mark.parametrize(("flags", "messages"), [pytest.param(f, m, id=i) for i, f, m in REFUSALS])
def test_the_chart_refuses_with_what_to_do(flags: tuple[str, ...], messages: list[str]) -> None:
    with pytest.raises(HelmError) as raised:
        template(*flags)
    assert all(message in str(raised.value) for message in messages), str(raised.value)


def test_the_default_values_alone_are_refused_for_their_placeholder_images() -> None:
    with pytest.raises(HelmError, match=r"webhook\.image\.repository is the placeholder mpijob-operator/webhook"):
        helm(helm_binary(), "template", "x", str(CHART))


@pytest.mark.parametrize(("replicas", "min_available", "expected"), [("1", "0", 0), ("3", "2", 2), ("3", "66%", "66%")])
def test_budgets_that_allow_an_eviction_are_accepted(replicas: str, min_available: str, expected: int | str) -> None:
    """66% of 3 rounds up to 2 pods kept: one may be evicted."""
    rendered = render(tuple(value_flags({"webhook.replicas": replicas, "webhook.minAvailable": min_available})))
    pdb = rendered[("PodDisruptionBudget", "mpi-operator", "mpijob-webhook")]
    assert pdb["spec"] == {"minAvailable": expected, "selector": {"matchLabels": {"app.kubernetes.io/name":
                                                                                  "mpijob-webhook"}}}


def notes(*flags: str) -> str:
    """NOTES.txt as `helm install` prints it (a client-side dry run: no cluster)."""
    out = helm(helm_binary(), "install", "mpi-operator", str(CHART), "--dry-run=client", *value_flags(IMAGES),
               *flags)
    return out.split("NOTES:\n", 1)[1]


def test_notes_say_how_to_check_the_certificates_the_crd_and_upgrades() -> None:
    default = notes()
    assert default.startswith(
        "MPIJob operator: release mpi-operator in the namespace default, chart mpi-operator 0.1.0; its objects are in "
        "the namespace mpi-operator.\n\nCheck that both components serve:\n"
        "  kubectl -n mpi-operator rollout status deployment/mpijob-webhook deployment/mpi-operator\n")
    assert "Certificates (cert-manager):\n  cert-manager issues" in default
    assert ("The CRD mpijobs.kubeflow.org is part of the release, kept by helm uninstall with every MPIJob; it serves "
            "kubeflow.org/v2beta1.\n") in default
    assert "--reset-then-reuse-values" in default
    manual = notes(*value_flags({"certificates.mode": "manual", "certificates.manual.caBundle": CA_BUNDLE,
                                 "apiVersions.v2": "true"}))
    assert "Certificates (manual):\n  the certificates you gave (certificates.manual) do not renew themselves" in manual
    assert "it serves kubeflow.org/v2beta1 and v2 (reads of MPIJobs go through the conversion webhook)" in manual
    managed = notes(*value_flags({"certificates.mode": "reconciler", "crds.enabled": "false"}))
    assert "Certificates (managed):\n  the reconciler makes the Secret mpijob-webhook-tls" in managed
    assert "is yours to apply (crds.enabled=false): kubectl apply --server-side --force-conflicts -k deploy/crds/" in (
        managed)


def test_lint_passes_with_every_knob_set(tmp_path: Path) -> None:
    values = {component: every_knob(component) for component in ("webhook", "reconciler")} | {
        "rbac": {"aggregateToDefaultRoles": True}}
    assert "0 chart(s) failed" in template(*values_file(tmp_path, values), command="lint")
