"""Generators: the MPIJob CRD (crd.py, `make crd`) and the API reference (api_reference.py, `make api-reference`)."""
