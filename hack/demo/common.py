"""What both parts of ``make demo`` share: the examples they run, where, and how they say what they do."""

from __future__ import annotations

from hack.devcluster import LocalCluster
from hack.devcluster.operators import REPO_ROOT

CRD = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
EXAMPLES = REPO_ROOT / "examples"
JOBS = ("pi-openmpi", "pi-intel", "pi-mpich")
NAMESPACE = "demo"


def say(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def show_rejection(cluster: LocalCluster) -> None:
    """Apply the invalid example and print the API server's answer: our webhook's field errors."""
    say("kubectl apply -f examples/invalid-launcher-replicas.yaml (upstream would accept it and never run it)")
    result = cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(EXAMPLES / "invalid-launcher-replicas.yaml"))
    print(result.stderr.strip() or result.stdout.strip())
