"""The caBundles to keep current: every webhook of the two webhook configurations ``mpijob-webhook`` and the conversion
webhook of the CRD ``mpijobs.kubeflow.org``. Pure: objects in, JSON patches out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509

from reconciler.certs.material import certificates_of_bundle
from reconciler.runtime.api_resources import Resource
from shared.certificates import is_ca
from shared.jsondict import JSONDict

WEBHOOK_NAME = "mpijob-webhook"
CRD_NAME = "mpijobs.kubeflow.org"
CERT_MANAGER_ANNOTATION = "cert-manager.io/inject-ca-from"


@dataclass(frozen=True)
class Target:
    """One object whose caBundle(s) must hold the Secret's ``ca.crt``."""

    resource: Resource
    name: str

    @property
    def conversion(self) -> bool:
        return self.resource.plural == "customresourcedefinitions"

    def describe(self) -> str:
        return f"{self.resource.plural}/{self.name}"

    def bundles(self, obj: JSONDict | None) -> list[str] | None:
        """The caBundle of each webhook of the object ("" where unset); None when there is no webhook to trust us
        (the object does not exist, or the CRD converts without a webhook)."""
        if obj is None:
            return None
        if self.conversion:
            conversion = (obj.get("spec") or {}).get("conversion") or {}
            if conversion.get("strategy") != "Webhook":
                return None
            return [str(((conversion.get("webhook") or {}).get("clientConfig") or {}).get("caBundle") or "")]
        return [str((hook.get("clientConfig") or {}).get("caBundle") or "") for hook in obj.get("webhooks") or []]

    def patch(self, obj: JSONDict | None, bundle: str) -> list[JSONDict]:
        """The JSON patch that sets every caBundle of the object to ``bundle`` ([] when each holds it already). Each
        webhook is named by a test operation, so that a list changed meanwhile fails the patch instead of
        receiving a caBundle meant for another entry."""
        current = self.bundles(obj)
        if current is None or all(value == bundle for value in current):
            return []
        assert obj is not None
        if self.conversion:
            return [{"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"},
                    {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": bundle}]
        ops: list[JSONDict] = []
        for i, hook in enumerate(obj.get("webhooks") or []):
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle})
        return ops

    def slim(self, obj: JSONDict) -> JSONDict:
        """What the rotator keeps of the object (the CRD is half a megabyte): name, version, annotations and the
        parts a patch is made of."""
        metadata = obj.get("metadata") or {}
        slim: JSONDict = {"metadata": {key: metadata[key] for key in ("name", "resourceVersion", "annotations")
                                       if key in metadata}}
        if self.conversion:
            conversion = (obj.get("spec") or {}).get("conversion") or {}
            bundle = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("caBundle")
            slim["spec"] = {"conversion": {"strategy": conversion.get("strategy"),
                                           "webhook": {"clientConfig": {"caBundle": bundle}}}}
        else:
            slim["webhooks"] = [{"name": hook.get("name"), "clientConfig": {
                "caBundle": (hook.get("clientConfig") or {}).get("caBundle")}} for hook in obj.get("webhooks") or []]
        return slim


MUTATING = Target(Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                           "MutatingWebhookConfiguration", namespaced=False), WEBHOOK_NAME)
VALIDATING = Target(Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                             "ValidatingWebhookConfiguration", namespaced=False), WEBHOOK_NAME)
CRD = Target(Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                      namespaced=False), CRD_NAME)
TARGETS = (MUTATING, VALIDATING, CRD)


def trusts(bundles: Sequence[str] | None, ca: x509.Certificate) -> bool:
    """Whether every one of an object's caBundles holds ``ca`` (an object with no webhook trusts anything)."""
    return bundles is None or all(ca in certificates_of_bundle(value) for value in bundles)


def cas_in(bundles: Sequence[str] | None) -> list[x509.Certificate]:
    """The CA certificates an object's caBundles hold, each once."""
    found: list[x509.Certificate] = []
    for value in bundles or ():
        found += [c for c in certificates_of_bundle(value) if is_ca(c) and c not in found]
    return found
