"""The webhook's built-in serving certificates, made and renewed by the reconciler (``--manage-webhook-certificates``).

``material``: what the TLS Secret holds. ``plan``: what to renew, when (pure). ``targets``: the caBundles of the two
webhook configurations and of the CRD's conversion webhook (pure). ``rotator``: the loop. ``kube``: its API calls.
"""
