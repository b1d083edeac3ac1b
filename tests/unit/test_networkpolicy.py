"""deploy/networkpolicy: the example NetworkPolicy selects exactly the webhook's pods (the labels of
deploy/webhook/deployment.yaml), admits TCP to their container port only from the API server's placeholder range
and the namespace `monitoring`, allows no egress, and is not part of the default kustomization."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.devcluster import HarnessError
from hack.devcluster.binaries import find_bin_dir

ROOT = Path(__file__).resolve().parents[2]
POLICY_DIR = ROOT / "deploy" / "networkpolicy"
PLACEHOLDER = "192.0.2.0/24"  # TEST-NET-1 (RFC 5737): matches no real address until it is replaced


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return document


def policy() -> dict[str, Any]:
    return load(POLICY_DIR / "webhook-networkpolicy.yaml")


def webhook_deployment() -> dict[str, Any]:
    return load(ROOT / "deploy" / "webhook" / "deployment.yaml")


def test_it_selects_the_webhook_pods_and_nothing_else() -> None:
    deployment = webhook_deployment()
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = policy()["spec"]["podSelector"]
    assert selector == {"matchLabels": {"app.kubernetes.io/name": "mpijob-webhook"}}
    assert selector["matchLabels"].items() <= pod_labels.items()
    assert selector == deployment["spec"]["selector"], "the pods the Deployment owns, no more"
    assert policy()["metadata"]["namespace"] == deployment["metadata"]["namespace"] == "mpi-operator"


def test_it_admits_the_api_server_and_monitoring_on_the_container_port_only() -> None:
    [container] = webhook_deployment()["spec"]["template"]["spec"]["containers"]
    [port] = [p for p in container["ports"] if p["name"] == "https"]
    only_the_webhook_port = [{"protocol": "TCP", "port": port["containerPort"]}]
    spec = policy()["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert "egress" not in spec, "the webhook opens no connection"
    assert spec["ingress"] == [
        {"from": [{"ipBlock": {"cidr": PLACEHOLDER}}], "ports": only_the_webhook_port},
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
         "ports": only_the_webhook_port},
    ]


def test_it_is_an_example_outside_the_default_kustomization() -> None:
    assert load(POLICY_DIR / "kustomization.yaml")["resources"] == ["webhook-networkpolicy.yaml"]
    assert "networkpolicy" not in str(load(ROOT / "deploy" / "kustomization.yaml")["resources"])
    guide = (ROOT / "docs" / "operator-guide.md").read_text(encoding="utf-8")
    assert "\n## Network policy\n" in guide
    assert PLACEHOLDER in guide
    assert "deploy/networkpolicy/" in guide


def kubectl() -> str:
    on_path = shutil.which("kubectl")
    if on_path:
        return on_path
    try:
        return str(find_bin_dir() / "kubectl")
    except HarnessError as exc:
        pytest.skip(f"kubectl is not available: {exc}")


def test_kustomize_renders_it_with_the_operators_label() -> None:
    rendered = subprocess.run([kubectl(), "kustomize", str(POLICY_DIR)], capture_output=True, text=True, check=True,
                              timeout=120).stdout
    expected = policy()
    expected["metadata"]["labels"]["app.kubernetes.io/part-of"] = "mpijob-operator"
    assert yaml.safe_load(rendered) == expected
