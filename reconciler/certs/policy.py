"""The rotation's policy from the reconciler's options."""

from __future__ import annotations

from reconciler.certs.plan import Policy
from reconciler.options import Options
from shared.certificates import service_dns_names

NAMESPACE, SERVICE, SECRET = "mpi-operator", "mpijob-webhook", "mpijob-webhook-tls"
"""Where the shipped manifests put the webhook (deploy/webhook, the CRD's conversion Service): fixed there too."""


def certificate_policy(options: Options) -> Policy:
    """The Service's DNS names (``--cluster-domain``, else cluster.local, for the longest) plus any extra ones, and
    the four durations."""
    names = service_dns_names(SERVICE, NAMESPACE, options.cluster_domain or "cluster.local")
    names += [n for n in options.webhook_cert_extra_dns_names if n not in names]
    return Policy(tuple(names), serving_duration=options.webhook_cert_duration,
                  serving_renew_before=options.webhook_cert_renew_before, ca_duration=options.webhook_ca_duration,
                  ca_renew_before=options.webhook_ca_renew_before)
