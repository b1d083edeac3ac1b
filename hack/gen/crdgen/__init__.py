"""The pieces of hack/gen/crd.py: OpenAPI sources, the structural-schema converter, the MPIJob schema."""
