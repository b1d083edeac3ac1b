#!/usr/bin/env bash
# What the registry path of the real-node tests needs (tests/e2e/test_registry.py): Debian's docker-registry
# (the CNCF distribution registry, run by the tests as a host process on 127.0.0.1, never as a service) and
# skopeo (push-operator-images.sh, `make images`). Installed with apt-get when missing and we are root.
# Prints the docker-registry binary as the last line of stdout.
set -euo pipefail

log() { printf '[install-registry %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
missing=()
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v skopeo >/dev/null || missing+=(skopeo)
if (( ${#missing[@]} )); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    log "error: missing ${missing[*]} (apt-get install ${missing[*]}, as root)"; exit 2
  fi
  log "installing ${missing[*]}"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" || \
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; }) >&2
fi
command -v docker-registry
