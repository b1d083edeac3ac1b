"""Turn kubeflow.org/v2 on and off on a cluster of the harness, with the commands docs/operator-guide.md gives.

    enable(cluster)     # kubectl apply --server-side --force-conflicts -k deploy/crds-v2/
    disable(cluster)    # the conversion reset (kubectl patch), then kubectl apply --server-side --force-conflicts -k
                        # deploy/crds/
    served_versions(cluster) -> ["v2beta1"] or ["v2beta1", "v2"]
    wait_served(cluster, versions)  # after Helm changed them: until served, kubectl's discovery cache refreshed

The default CRD (deploy/crds/) serves v2beta1 alone with no conversion webhook; deploy/crds-v2/ adds the v2 version
and the conversion webhook at the Service mpi-operator/mpijob-webhook. Turning v2 off needs the conversion reset first:
a caBundle written by another field manager (cert-manager's cainjector, the reconciler's certificate rotation, an
admin's patch) survives the apply of deploy/crds/, and a conversion webhook with strategy None is invalid.
--force-conflicts: spec.versions is one atomic field, which kubectl takes over from whoever created the CRD
otherwise (Helm, a client-side apply, this harness's own create). Both functions refresh kubectl's discovery cache
(`kubectl api-resources`): a cached v2 would keep `kubectl get mpijobs` asking for a version that is gone.
"""

from __future__ import annotations

import json

from .binaries import REPO_ROOT
from .cluster import LocalCluster
from .rest import ApiError
from .wait import HarnessError, wait_for

CRDS = REPO_ROOT / "deploy" / "crds"
CRDS_V2 = REPO_ROOT / "deploy" / "crds-v2"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mpijobs.kubeflow.org"
GROUP_PATH = "/apis/kubeflow.org"
# kubectl patch's body that turns the conversion webhook off whoever wrote its caBundle (docs/operator-guide.md)
CONVERSION_OFF = {"spec": {"conversion": {"strategy": "None", "webhook": None}}}


def served_versions(cluster: LocalCluster) -> list[str]:
    """The versions of kubeflow.org the API server's discovery serves, preferred first ([] when none)."""
    try:
        group = cluster.rest.get(GROUP_PATH)
    except ApiError as err:
        if err.status == 404:
            return []
        raise
    preferred = group["preferredVersion"]["version"]
    return [preferred, *sorted(v["version"] for v in group["versions"] if v["version"] != preferred)]


def conversion_strategy(cluster: LocalCluster) -> str:
    """The CRD's spec.conversion.strategy ("None" or "Webhook")."""
    return str(cluster.rest.get(CRD_PATH)["spec"]["conversion"]["strategy"])


def enable(cluster: LocalCluster, timeout: float = 60) -> None:
    """`kubectl apply --server-side --force-conflicts -k deploy/crds-v2/`, until discovery serves v2 (the preferred
    version)."""
    _kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(CRDS_V2))
    wait_served(cluster, ["v2", "v2beta1"], timeout)


def disable(cluster: LocalCluster, timeout: float = 60) -> None:
    """The documented way back to the default CRD: the conversion reset, then `kubectl apply --server-side
    --force-conflicts -k deploy/crds/`, until discovery serves v2beta1 alone."""
    _kubectl(cluster, "patch", "crd", "mpijobs.kubeflow.org", "--type=merge", "-p", json.dumps(CONVERSION_OFF))
    _kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    wait_served(cluster, ["v2beta1"], timeout)


def wait_served(cluster: LocalCluster, versions: list[str], timeout: float = 60) -> None:
    """Until discovery serves exactly ``versions`` (sorted), then kubectl's discovery cache refreshed: after any change
    of the served versions, whoever made it (these functions, Helm), or kubectl keeps asking for the old ones."""
    wait_for(lambda: served_versions(cluster) == versions, timeout, 0.2,
             what=f"kubeflow.org serving {', '.join(versions)}")
    _kubectl(cluster, "api-resources", "--api-group=kubeflow.org")  # refreshes kubectl's discovery cache


def _kubectl(cluster: LocalCluster, *args: str) -> None:
    result = cluster.kubectl(*args)
    if result.returncode != 0:
        raise HarnessError(f"kubectl {' '.join(args[:2])} failed:\n{result.stderr}")
