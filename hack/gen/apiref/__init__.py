"""The MPIJob API reference (docs/api-reference.md), generated from the pydantic models of shared/api.

``shapes`` walks the models and compares them with the CRD, ``probes`` asks the webhook's own admission
functions which values they reject, ``markdown`` writes the page; ``hack/gen/api_reference.py`` is the
command.
"""
