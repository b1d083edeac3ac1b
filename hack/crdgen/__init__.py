"""The pieces of hack/gen_crd.py: OpenAPI sources, the structural-schema converter, the MPIJob schema."""
