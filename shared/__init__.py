"""Code shared by the webhook and the reconciler (not to be confused with the reference folder beside the checkout)."""
