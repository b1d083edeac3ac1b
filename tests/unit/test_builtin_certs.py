"""The managed certificates' manifests (deploy/certs/builtin) and the chart's certificates.mode=managed: exactly
deploy/ without cert-manager's objects, plus the reconciler's flags and its ClusterRole restricted by name, and the
same objects on both paths. The webhook pods mount the serving pair only, never the CA's key."""

from __future__ import annotations

from typing import Any

import pytest

from hack.devcluster.helm import value_flags
from reconciler.options import parse_options
from tests.unit.test_chart import (
    MUTATING,
    RECONCILER,
    VALIDATING,
    WEBHOOK,
    Key,
    changes,
    kustomize,
    kustomize_crds,
    render,
)

CERT_MANAGER_KINDS = ("Issuer", "Certificate")
ROLE = ("ClusterRole", "", "mpi-operator-webhook-certificates")
BINDING = ("ClusterRoleBinding", "", "mpi-operator-webhook-certificates")
FLAGS = ["--manage-webhook-certificates=true", "--webhook-cert-duration=8760h", "--webhook-cert-renew-before=720h",
         "--webhook-ca-duration=87600h", "--webhook-ca-renew-before=2160h"]


def args(objects: dict[Key, Any]) -> list[str]:
    return [str(a) for a in objects[RECONCILER]["spec"]["template"]["spec"]["containers"][0]["args"]]


def test_the_overlay_is_deploy_without_cert_manager_plus_the_rotation() -> None:
    base = {k: v for k, v in kustomize("deploy").items() if k[0] not in CERT_MANAGER_KINDS}
    builtin = kustomize("deploy/certs/builtin")
    assert changes(base, builtin) == {
        ROLE: {"(added)"}, BINDING: {"(added)"},
        MUTATING: {"metadata.annotations"}, VALIDATING: {"metadata.annotations"},
        RECONCILER: {f"spec.template.spec.containers[0].args[{i}]" for i in range(2, 7)},
    }
    assert args(builtin)[-5:] == FLAGS


def test_the_rotation_is_granted_list_watch_and_patch_of_three_named_objects_only() -> None:
    role = kustomize("deploy/certs/builtin")[ROLE]
    assert role["rules"] == [
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
         "resourceNames": ["mpijob-webhook"], "verbs": ["list", "watch", "patch"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
         "resourceNames": ["mpijobs.kubeflow.org"], "verbs": ["list", "watch", "patch"]}]
    binding = kustomize("deploy/certs/builtin")[BINDING]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]


def test_the_flags_parse_as_the_defaults_of_the_reconciler() -> None:
    options = parse_options(args(kustomize("deploy/certs/builtin")))
    defaults = parse_options(["--manage-webhook-certificates"])
    assert options.manage_webhook_certificates
    assert (options.webhook_cert_duration, options.webhook_cert_renew_before, options.webhook_ca_duration,
            options.webhook_ca_renew_before) == (defaults.webhook_cert_duration, defaults.webhook_cert_renew_before,
                                                 defaults.webhook_ca_duration, defaults.webhook_ca_renew_before)


@pytest.mark.parametrize("mode", ["managed", "reconciler"])
def test_the_chart_renders_the_overlay_with_certificates_mode_managed(mode: str) -> None:
    """managed, or its deprecated alias reconciler."""
    chart = render(tuple(value_flags({"certificates.mode": mode})))
    expected = {**kustomize_crds(), **kustomize("deploy/certs/builtin")}
    assert changes(expected, chart) == {}


def test_the_chart_passes_its_durations() -> None:
    chart = render(tuple(value_flags({"certificates.mode": "managed", "certificates.reconciler.certDuration": "2m",
                                      "certificates.reconciler.caRenewBefore": "90s"})))
    assert "--webhook-cert-duration=2m" in args(chart)
    assert "--webhook-ca-renew-before=90s" in args(chart)


def test_the_webhook_pods_mount_the_serving_pair_only() -> None:
    for objects in (kustomize("deploy"), kustomize("deploy/certs/builtin"), render()):
        [volume] = [v for v in objects[WEBHOOK]["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["items"] == [{"key": "tls.crt", "path": "tls.crt"},
                                             {"key": "tls.key", "path": "tls.key"}]
