"""The kustomize manifests under deploy/ (the generated CRD excepted): they parse, hang together, and
carry the webhook settings and the restricted Pod Security profile the docs promise."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.worker_backend import WORKER_JOB_LABEL
from webhook.app import create_app
from webhook.certs import service_dns_names

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE, SERVICE = "mpi-operator", "mpijob-webhook"
RECONCILER = "mpi-operator"  # upstream's Deployment name, kept (docs/migration.md)
Doc = dict[str, Any]


@cache
def documents() -> tuple[tuple[Path, Doc], ...]:
    """Every YAML document under deploy/ except the CRDs (and the v2 switch, deploy/crds-v2 and its component: both
    tests/unit/test_crd.py), the Helm chart (tests/unit/test_chart.py) and the monitoring files outside the kustomize
    tree (tests/unit/test_monitoring.py), with the file it came from."""
    skipped = {"crds", "crds-v2", "api-v2", "chart", "monitoring"}
    files = sorted(p for p in DEPLOY.rglob("*.yaml") if not skipped & set(p.relative_to(DEPLOY).parts))
    return tuple((f, d) for f in files for d in yaml.safe_load_all(f.read_text()) if d is not None)


def objects(kind: str) -> list[Doc]:
    return [d for _, d in documents() if d.get("kind") == kind]


def one(kind: str, name: str) -> Doc:
    found = [d for d in objects(kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind}/{name}, found {len(found)}"
    return found[0]


def test_every_document_is_a_kubernetes_object() -> None:
    assert documents(), "no manifests found"
    for path, doc in documents():
        assert isinstance(doc, dict), path
        assert {"apiVersion", "kind"} <= doc.keys(), path
        assert doc["kind"] == "Kustomization" or doc.get("metadata", {}).get("name"), path


def test_namespaced_objects_live_in_the_operator_namespace() -> None:
    cluster_scoped = {"Kustomization", "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
    cluster_scoped |= {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    one("Namespace", NAMESPACE)
    for path, doc in documents():
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"].get("namespace") == NAMESPACE, f"{path}: {doc['kind']}"


@pytest.mark.parametrize(
    "kustomization", sorted(DEPLOY.rglob("kustomization.yaml")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_kustomization_resources_exist_and_cover_the_directory(kustomization: Path) -> None:
    spec = yaml.safe_load(kustomization.read_text())
    resources = spec.get("resources", [])  # a Component (deploy/components/api-v2) may only patch
    patch_files = [patch["path"] for patch in spec.get("patches", []) if "path" in patch]
    for entry in [*resources, *spec.get("components", []), *patch_files]:
        target = kustomization.parent / entry
        assert target.is_file() or (target / "kustomization.yaml").is_file(), f"{kustomization}: {entry}"
    if kustomization.parent != DEPLOY:
        local = {p.name for p in kustomization.parent.glob("*.yaml")} - {"kustomization.yaml"}
        listed = {entry for entry in [*resources, *patch_files]
                  if "/" not in entry}  # deploy/certs/builtin also names ../../rbac ...
        assert local == listed, "every manifest in the directory is listed, and only those"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_builds_the_whole_tree() -> None:
    result = subprocess.run(["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    # deploy/certs/builtin is an alternative to deploy/, built on its own (tests/unit/test_builtin_certs.py), and
    # deploy/networkpolicy an example applied on its own (tests/unit/test_networkpolicy.py)
    apart = {"builtin", "networkpolicy"}
    expected = {(d["kind"], d["metadata"]["name"]) for path, d in documents()
                if d["kind"] != "Kustomization" and not apart & set(path.relative_to(DEPLOY).parts)}
    assert expected <= {(d["kind"], d["metadata"]["name"]) for d in built}
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mpijob-operator" for d in built)
    assert "CustomResourceDefinition" not in {d["kind"] for d in built}, "deploy/crds/ is applied on its own"
    result = subprocess.run(["kubectl", "kustomize", str(DEPLOY / "crds")], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    (crd,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert (crd["kind"], crd["metadata"]["name"]) == ("CustomResourceDefinition", "mpijobs.kubeflow.org")
    assert crd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mpijob-operator"


def test_root_kustomization_lists_the_components() -> None:
    """The CRD is not one of them: `kubectl delete -k deploy/` removes the operator and keeps every MPIJob."""
    resources = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert resources == ["rbac", "webhook", "reconciler", "certs"]


def test_the_crd_has_a_kustomization_of_its_own_with_the_same_labels() -> None:
    """deploy/crds/ is applied first and deleted only on purpose; its objects carry the operator's labels."""
    root, crds = (yaml.safe_load((d / "kustomization.yaml").read_text()) for d in (DEPLOY, DEPLOY / "crds"))
    assert crds["resources"] == ["kubeflow.org_mpijobs.yaml"]
    assert crds["labels"] == root["labels"]
    assert set(crds) == {"apiVersion", "kind", "resources", "labels"}


WEBHOOKS = [
    ("MutatingWebhookConfiguration", "mpijob-defaulter.kubeflow.org", "mutate", "Ignore"),
    ("ValidatingWebhookConfiguration", "mpijob-validator.kubeflow.org", "validate", "Fail"),
]


@pytest.mark.parametrize(("kind", "name", "verb", "failure_policy"), WEBHOOKS, ids=["mutating", "validating"])
def test_webhook_configuration(kind: str, name: str, verb: str, failure_policy: str) -> None:
    config = one(kind, SERVICE)
    certificate = one("Certificate", SERVICE)
    annotation = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert annotation == f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    hook = config["webhooks"][0]
    assert [h["name"] for h in config["webhooks"]] == [name, *([POD_WEBHOOK] if verb == "mutate" else [])]
    assert hook["admissionReviewVersions"] == ["v1"]
    assert (hook["sideEffects"], hook["failurePolicy"]) == ("None", failure_policy)
    assert (hook["timeoutSeconds"], hook["matchPolicy"]) == (5, "Equivalent")
    assert hook.get("reinvocationPolicy") == ("IfNeeded" if verb == "mutate" else None)
    assert hook["rules"] == [
        {
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v2beta1", "v2"],
            "resources": ["mpijobs"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    # The controller-runtime naming convention: /<verb>-<group with dashes>-<version>-<kind>.
    assert hook["clientConfig"]["service"] == {
        "name": SERVICE,
        "namespace": NAMESPACE,
        "path": f"/{verb}-kubeflow-org-v2beta1-mpijob",
        "port": 443,
    }
    assert "caBundle" not in hook["clientConfig"], "injected by cert-manager or patched in, never committed"
    [expr] = hook["namespaceSelector"]["matchExpressions"]
    assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}


POD_WEBHOOK = "mpijob-worker-pods.kubeflow.org"


def test_pod_webhook_configuration() -> None:
    """The IndexedJob backend's pod webhook, in the mutating configuration so that its caBundle is injected with the
    others': sent only the worker Jobs' pods (the objectSelector), on CREATE, and never holding a pod back (Ignore, a
    short timeout, no side effects)."""
    config = one("MutatingWebhookConfiguration", SERVICE)
    [hook] = [h for h in config["webhooks"] if h["name"] == POD_WEBHOOK]
    assert hook == {
        "name": POD_WEBHOOK, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
        "timeoutSeconds": 2, "matchPolicy": "Equivalent", "reinvocationPolicy": "Never",
        "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/mutate--v1-pod", "port": 443}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"],
                   "scope": "Namespaced"}],
        "objectSelector": {"matchExpressions": [{"key": WORKER_JOB_LABEL, "operator": "Exists"}]},
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}]},
    }


@pytest.mark.parametrize("path", ["/mutate-kubeflow-org-v2beta1-mpijob", "/validate-kubeflow-org-v2beta1-mpijob",
                                  "/mutate--v1-pod"])
def test_webhook_paths_are_served_by_the_app(path: str) -> None:
    routes = {(route.method, route.resource.canonical) for route in create_app().router.routes() if route.resource}
    assert ("POST", path) in routes


def pod_specs() -> list[tuple[str, Doc]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in objects("Deployment")]


@pytest.mark.parametrize(("name", "pod"), pod_specs(), ids=[n for n, _ in pod_specs()])
def test_pods_meet_the_restricted_profile(name: str, pod: Doc) -> None:
    pod_sc = pod.get("securityContext", {})
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    allowed = {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
    for volume in pod.get("volumes", []):
        assert set(volume) - {"name"} <= allowed, volume
    for container in pod["containers"] + pod.get("initContainers", []):
        sc = {**pod_sc, **container.get("securityContext", {})}
        assert sc.get("runAsNonRoot") is True
        assert sc.get("runAsUser", 0) == 65532
        assert sc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
        assert sc.get("allowPrivilegeEscalation") is False
        assert sc.get("privileged", False) is False
        assert sc.get("readOnlyRootFilesystem") is True
        assert "ALL" in sc["capabilities"]["drop"]
        assert set(sc["capabilities"].get("add", [])) <= {"NET_BIND_SERVICE"}
        assert container["resources"]["requests"], "requests let the scheduler place the pod"


def container(deployment: str) -> Doc:
    containers: list[Doc] = one("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def port_number(c: Doc, port: int | str) -> int:
    if isinstance(port, int):
        return port
    numbers: list[int] = [p["containerPort"] for p in c["ports"] if p["name"] == port]
    assert len(numbers) == 1, f"container port {port!r}"
    return numbers[0]


def test_webhook_deployment() -> None:
    deployment = one("Deployment", SERVICE)
    pod, c = deployment["spec"]["template"]["spec"], container(SERVICE)
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == SERVICE
    assert pod["automountServiceAccountToken"] is False
    assert one("ServiceAccount", SERVICE)["automountServiceAccountToken"] is False
    selector = {"matchLabels": {"app.kubernetes.io/name": SERVICE}}
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == SERVICE
    # Spread over nodes (and zones), never refused: a one-node cluster still runs both replicas.
    assert pod["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}
        for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone")]
    assert c["args"] == ["--port", "9443", "--tls-cert-file", "/tls/tls.crt", "--tls-key-file", "/tls/tls.key"]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert (get["path"], get["scheme"], port_number(c, get["port"])) == (path, "HTTPS", 9443)
    [mount] = [m for m in c["volumeMounts"] if m["mountPath"] == "/tls"]
    assert "subPath" not in mount, "a subPath mount never sees Secret updates"
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == one("Certificate", SERVICE)["spec"]["secretName"] == "mpijob-webhook-tls"


def test_webhook_priority_class_ships_with_the_manifests() -> None:
    """system-cluster-critical is for kube-system: the webhook's class is ours, high but below the system ones."""
    pod = one("Deployment", SERVICE)["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "mpi-operator-critical"
    priority_class = one("PriorityClass", "mpi-operator-critical")
    assert {k: v for k, v in priority_class.items() if k not in ("metadata", "description")} == {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000000000, "globalDefault": False,
        "preemptionPolicy": "PreemptLowerPriority"}
    reconciler = one("Deployment", RECONCILER)["spec"]["template"]["spec"]
    assert "priorityClassName" not in reconciler


def test_webhook_service_and_disruption_budget() -> None:
    labels = one("Deployment", SERVICE)["spec"]["template"]["metadata"]["labels"]
    service = one("Service", SERVICE)
    assert service["spec"]["selector"].items() <= labels.items()
    [port] = service["spec"]["ports"]
    assert (port["port"], port_number(container(SERVICE), port["targetPort"])) == (443, 9443)
    pdb = one("PodDisruptionBudget", SERVICE)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_serving_certificate() -> None:
    spec = one("Certificate", SERVICE)["spec"]
    assert spec["dnsNames"] == service_dns_names(SERVICE, NAMESPACE)
    assert (spec["privateKey"]["algorithm"], spec["privateKey"]["size"]) == ("ECDSA", 256)
    assert spec["renewBefore"]
    issuer = one(spec["issuerRef"]["kind"], spec["issuerRef"]["name"])
    assert one("Certificate", "mpijob-webhook-ca")["spec"]["secretName"] == issuer["spec"]["ca"]["secretName"]


def test_reconciler_deployment() -> None:
    deployment, c = one("Deployment", RECONCILER), container(RECONCILER)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "mpi-operator"
    assert c["command"] == ["python", "-m", "reconciler"]
    assert f"--lock-namespace={NAMESPACE}" in c["args"]
    # liveness restarts a wedged process; readiness shows the waits (API server, Lease, caches) as not ready
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert (get["path"], port_number(c, get["port"])) == (path, 8080)


# Upstream's Deployment (v0.8.2 deploy/v2beta1/mpi-operator.yaml; manifests/overlays/standalone renders the
# same): its selector is immutable, so ours must be equal for `kubectl apply` over it to be a rolling update.
UPSTREAM_LABELS = {"app": "mpi-operator", "app.kubernetes.io/component": "mpijob",
                   "app.kubernetes.io/name": "mpi-operator", "kustomize.component": "mpi-operator"}


def test_reconciler_deployment_replaces_upstreams_in_place() -> None:
    deployment = one("Deployment", RECONCILER)
    assert (deployment["metadata"]["name"], deployment["metadata"]["namespace"]) == ("mpi-operator", "mpi-operator")
    assert deployment["spec"]["selector"] == {"matchLabels": UPSTREAM_LABELS}
    assert deployment["metadata"]["labels"] == UPSTREAM_LABELS
    assert deployment["spec"]["template"]["metadata"]["labels"] == UPSTREAM_LABELS
    assert "strategy" not in deployment["spec"], "the default rolling update starts ours before stopping upstream's"
    assert container(RECONCILER)["name"] == "mpi-operator", "upstream's container name: merged, not added"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "mpi-operator"
    one("ServiceAccount", "mpi-operator")
    one("ClusterRole", "mpi-operator")
    one("ClusterRoleBinding", "mpi-operator")


# The reconciler's grants, exactly: tests/integration/test_least_privilege.py proves from the audit log that
# each is used (mpijobs/finalizers excepted, see its KEPT_UNUSED) and that nothing else is needed.
RECONCILER_GRANTS = {
    ("", "configmaps"): {"create", "get", "list", "watch", "patch"},
    ("", "secrets"): {"create", "get", "list", "watch", "patch"},
    ("", "services"): {"create", "get", "list", "watch", "patch"},
    ("", "pods"): {"create", "get", "list", "watch", "delete"},
    ("", "events"): {"create"},
    ("batch", "jobs"): {"create", "get", "list", "watch", "update", "patch", "delete"},  # a failurePolicy restart
    ("batch", "jobs/status"): {"update"},
    ("discovery.k8s.io", "endpointslices"): {"list"},  # a WaitForWorkersReady launcher waits for the workers' names
    ("kubeflow.org", "mpijobs"): {"list", "watch"},
    ("kubeflow.org", "mpijobs/status"): {"update"},
    ("kubeflow.org", "mpijobs/finalizers"): {"update"},
    ("scheduling.volcano.sh", "podgroups"): {"create", "get", "list", "watch", "update", "delete"},
    ("scheduling.x-k8s.io", "podgroups"): {"create", "get", "list", "watch", "update", "delete"},
    ("scheduling.k8s.io", "priorityclasses"): {"get"},
    ("scheduling.k8s.io", "workloads"): {"create", "get", "list", "watch", "delete"},
    ("scheduling.k8s.io", "podgroups"): {"create", "get", "list", "watch", "delete"},
}
LEASE_ROLE = "mpi-operator-leader-election"


def granted(rules: list[Doc]) -> dict[tuple[str, str], set[str]]:
    result: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, "no resourceNames, no nonResourceURLs"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                result.setdefault((group, resource), set()).update(rule["verbs"])
    return result


def test_reconciler_cluster_role_grants_exactly_what_it_uses() -> None:
    grants = granted(one("ClusterRole", "mpi-operator")["rules"])
    assert grants == RECONCILER_GRANTS
    assert not any("*" in verbs for verbs in grants.values())
    assert not any("*" in key for group_resource in grants for key in group_resource)


def test_children_are_deleted_by_the_garbage_collector_not_by_us() -> None:
    """But the launcher Job, which a failurePolicy restart deletes (docs/proposals/v2.md)."""
    grants = granted(one("ClusterRole", "mpi-operator")["rules"])
    for child in (("", "configmaps"), ("", "secrets"), ("", "services")):
        assert "delete" not in grants[child], child
    assert not any(group == "events.k8s.io" for group, _ in grants), "core events only"


def test_leases_only_in_the_lock_namespace() -> None:
    assert not any(group == "coordination.k8s.io" for group, _ in granted(one("ClusterRole", "mpi-operator")["rules"]))
    role = one("Role", LEASE_ROLE)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert granted(role["rules"]) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    binding = one("RoleBinding", LEASE_ROLE)
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": LEASE_ROLE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": NAMESPACE}]
    assert f"--lock-namespace={NAMESPACE}" in container(RECONCILER)["args"]


def test_cluster_role_binding() -> None:
    binding = one("ClusterRoleBinding", "mpi-operator")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "mpi-operator",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": NAMESPACE}]


def test_only_the_reconciler_is_bound() -> None:
    bindings = objects("ClusterRoleBinding") + objects("RoleBinding")
    subjects = [s for b in bindings for s in b["subjects"]]
    assert subjects
    assert all(s == {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": NAMESPACE}
               for s in subjects), "the webhook's ServiceAccount has no bindings"


def test_aggregated_user_roles_match_upstream() -> None:
    prefix = "rbac.authorization.kubeflow.org/aggregate-to-"
    admin = one("ClusterRole", "kubeflow-mpijobs-admin")
    assert admin["metadata"]["labels"] == {prefix + "kubeflow-admin": "true"}
    assert admin["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {prefix + "kubeflow-mpijobs-admin": "true"}}
    ]
    assert "rules" not in admin
    edit, view = one("ClusterRole", "kubeflow-mpijobs-edit"), one("ClusterRole", "kubeflow-mpijobs-view")
    assert edit["metadata"]["labels"] == {prefix + "kubeflow-edit": "true", prefix + "kubeflow-mpijobs-admin": "true"}
    assert view["metadata"]["labels"] == {prefix + "kubeflow-view": "true"}
    write = ["create", "delete", "deletecollection", "patch", "update"]
    for role, verbs in ((edit, ["get", "list", "watch", *write]), (view, ["get", "list", "watch"])):
        assert role["rules"] == [
            {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs", "mpijobs/status"], "verbs": verbs}
        ]


@pytest.mark.parametrize("component", ["webhook", "reconciler"])
def test_dockerfile(component: str) -> None:
    lines = (ROOT / f"Dockerfile.{component}").read_text().splitlines()
    assert "ARG BASE_IMAGE=python:3.11-slim" in lines  # a public Python image for users; tests pass a local one
    assert sum(line.startswith("FROM ${BASE_IMAGE}") for line in lines) == 2
    # the locked versions with their hashes (make lock), then the project alone, and nothing left unlocked
    assert f"RUN pip install --require-hashes -r requirements/{component}.txt" in lines
    assert "RUN pip install --no-deps . && pip check" in lines
    assert "USER 65532:65532" in lines
    assert lines[-1] == f'ENTRYPOINT ["python", "-m", "{component}"]'


def _container_args(path: Path) -> list[str]:
    deployment = yaml.safe_load(path.read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [str(arg) for arg in container.get("args", [])]


def test_shipped_deployment_args_are_accepted_by_our_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Deployments and the CLIs cannot drift apart: each container's args parse with the real parser."""
    from reconciler.options import parse_options  # noqa: PLC0415
    from webhook.__main__ import parse_args  # noqa: PLC0415

    monkeypatch.delenv("KUBECONFIG", raising=False)
    reconciler = parse_options(_container_args(DEPLOY / "reconciler" / "deployment.yaml"))
    assert (reconciler.lock_namespace, reconciler.monitoring_port, reconciler.health_port) == ("mpi-operator", 9090,
                                                                                                8080)
    webhook = parse_args(_container_args(DEPLOY / "webhook" / "deployment.yaml"))
    assert (webhook.port, webhook.tls_cert_file, webhook.tls_key_file) == (9443, "/tls/tls.crt", "/tls/tls.key")


def test_only_the_webhook_configurations_are_left_for_the_second_apply() -> None:
    """The install that cannot lock MPIJob writes (docs/operator-guide.md): `kubectl apply -l
    'app.kubernetes.io/component!=admission-configuration'` applies everything but the two configurations."""
    component = "app.kubernetes.io/component"
    labelled = {(d["kind"], d["metadata"]["name"]) for _, d in documents()
                if d.get("metadata", {}).get("labels", {}).get(component) == "admission-configuration"}
    assert labelled == {("MutatingWebhookConfiguration", SERVICE), ("ValidatingWebhookConfiguration", SERVICE)}
