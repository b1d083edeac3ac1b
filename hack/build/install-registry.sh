#!/usr/bin/env bash
# What the registry path of the real-node tests needs (tests/e2e/test_registry.py): Debian's docker-registry
# (the CNCF distribution registry, run by the tests as a host process on 127.0.0.1, never as a service) and
# skopeo (push-operator-images.sh, `make images`). Installed with apt-get when missing and we are root.
# Prints the docker-registry binary as the last line of stdout.
set -euo pipefail

missing=()
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v skopeo >/dev/null || missing+=(skopeo)
(( ${#missing[@]} == 0 )) || bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${missing[@]}"
command -v docker-registry
