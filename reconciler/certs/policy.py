"""The rotation's policy from the reconciler's certificate flags (``reconciler.options.Options`` has them; this module
does not import it, so that the options can check a policy without an import cycle)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol

from reconciler.certs.plan import Policy
from shared.certificates import service_dns_names

NAMESPACE, SERVICE, SECRET = "mpi-operator", "mpijob-webhook", "mpijob-webhook-tls"
"""Where the shipped manifests put the webhook (deploy/webhook, the CRD's conversion Service): fixed there too."""


class CertificateFlags(Protocol):
    """The reconciler's flags that turn the rotation on and make its policy."""

    @property
    def manage_webhook_certificates(self) -> bool: ...
    @property
    def cluster_domain(self) -> str: ...
    @property
    def webhook_cert_extra_dns_names(self) -> Sequence[str]: ...
    @property
    def webhook_cert_duration(self) -> timedelta: ...
    @property
    def webhook_cert_renew_before(self) -> timedelta: ...
    @property
    def webhook_ca_duration(self) -> timedelta: ...
    @property
    def webhook_ca_renew_before(self) -> timedelta: ...


def certificate_policy(options: CertificateFlags) -> Policy:
    """The Service's DNS names (``--cluster-domain``, else cluster.local, for the longest) plus any extra ones, and
    the four durations."""
    names = service_dns_names(SERVICE, NAMESPACE, options.cluster_domain or "cluster.local")
    names += [n for n in options.webhook_cert_extra_dns_names if n not in names]
    return Policy(tuple(names), serving_duration=options.webhook_cert_duration,
                  serving_renew_before=options.webhook_cert_renew_before, ca_duration=options.webhook_ca_duration,
                  ca_renew_before=options.webhook_ca_renew_before)
