"""The webhook's built-in serving certificates, made and renewed by the reconciler (``--manage-webhook-certificates``).

``material``: what the TLS Secret holds. ``plan``: what to renew, when (pure). ``targets``: the caBundles of the two
webhook configurations and of the CRD's conversion webhook (pure). ``rotator``: the loop. ``kube``: its API calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from reconciler.certs.policy import CertificateFlags
    from reconciler.mpijob.controller import Background


def webhook_certificates(options: CertificateFlags, registry: CollectorRegistry) -> tuple[Background, ...]:
    """The reconciler's background task for ``--manage-webhook-certificates`` (none without it): made once per
    process (its metrics), run in each term of leadership by the controller. Imported only when on, so that an
    idle reconciler without it holds no cryptography."""
    if not options.manage_webhook_certificates:
        return ()
    from reconciler.certs.kube import WebhookCertificates  # noqa: PLC0415  (cryptography, only when used)
    from reconciler.certs.policy import certificate_policy  # noqa: PLC0415

    return (WebhookCertificates(certificate_policy(options), registry).keep,)
