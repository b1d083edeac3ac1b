"""Admission webhook for kubeflow.org/v2beta1 MPIJob: aiohttp app, TLS with reload, certificates."""
