#!/usr/bin/env bash
# `make images REGISTRY=registry.example.com/mpi [TAG=v0.1.0] [INSECURE=1]`: builds the operator's two images
# (build-operator-images.sh: buildah, no Docker engine) and pushes them with skopeo (Debian package, installed
# here when missing and we are root) as
#   $REGISTRY/mpijob-webhook:$TAG     from Dockerfile.webhook
#   $REGISTRY/mpijob-reconciler:$TAG  from Dockerfile.reconciler
# then prints each reference with its digest and the kustomize and Helm settings that deploy them.
#
#   REGISTRY  required: host[:port][/path], where the cluster's nodes pull from
#   TAG       default: `git describe --tags --always --dirty` of this checkout
#   INSECURE  1: the registry speaks plain HTTP or has a certificate this machine does not trust (a local test
#             registry; the nodes' container runtime must be told so too). Default: HTTPS, verified
# Credentials are skopeo's: `skopeo login <host>` first (or REGISTRY_AUTH_FILE=<auth.json>).
# stdout: the text below, ending with the two lines `webhook=<ref>@<digest>` and `reconciler=<ref>@<digest>`;
# progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { printf '[push-operator-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

REGISTRY="${REGISTRY:-}"
REGISTRY="${REGISTRY%/}"
if [[ -z "$REGISTRY" || "$REGISTRY" == *://* || "$REGISTRY" == *[[:space:]]* ]]; then
  echo "usage: make images REGISTRY=host[:port][/path] [TAG=...] [INSECURE=1]  (REGISTRY without a scheme)" >&2
  exit 2
fi
TAG="${TAG:-$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}"
if ! [[ "$TAG" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "TAG=$TAG is not a valid image tag" >&2; exit 2
fi
tls=(--dest-tls-verify=true)
[[ "${INSECURE:-}" == 1 ]] && tls=(--dest-tls-verify=false)

command -v skopeo >/dev/null || bash "$HERE/apt-install.sh" skopeo

images="$(bash "$HERE/build-operator-images.sh" | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
declare -A ref digest
for component in webhook reconciler; do
  archive="$(ls -t "$images/operator-$component-"????????????.tar | head -1)"  # the host's, not operator-<c>-arm64-*
  ref[$component]="$REGISTRY/mpijob-$component:$TAG"
  log "skopeo copy $(basename "$archive") -> ${ref[$component]}"
  skopeo copy --quiet "${tls[@]}" --digestfile "$work/$component.digest" \
    "docker-archive:$archive" "docker://${ref[$component]}" >&2
  digest[$component]="$(cat "$work/$component.digest")"
done

repo() { echo "${ref[$1]%:*}"; }
cat <<EOF
Pushed:
  ${ref[webhook]}  (${digest[webhook]})
  ${ref[reconciler]}  (${digest[reconciler]})

kustomize: an overlay of deploy/, e.g. overlays/registry/kustomization.yaml in this checkout (the resource is
relative to it), applied as docs/operator-guide.md#install says; "digest: sha256:..." instead of newTag pins it:
  apiVersion: kustomize.config.k8s.io/v1beta1
  kind: Kustomization
  resources:
    - ../../deploy
  images:
    - name: mpijob-operator/webhook
      newName: $(repo webhook)
      newTag: "$TAG"
    - name: mpijob-operator/reconciler
      newName: $(repo reconciler)
      newTag: "$TAG"

Helm:
  helm install mpi-operator deploy/chart/mpi-operator \\
    --set webhook.image.repository=$(repo webhook) --set-string webhook.image.tag=$TAG \\
    --set reconciler.image.repository=$(repo reconciler) --set-string reconciler.image.tag=$TAG
EOF
[[ "${INSECURE:-}" == 1 ]] && cat <<EOF

INSECURE=1: every node's container runtime must be configured for ${REGISTRY%%/*} (containerd: a hosts.toml,
docs/operator-guide.md#images-from-your-registry).
EOF
echo
echo "webhook=${ref[webhook]}@${digest[webhook]}"
echo "reconciler=${ref[reconciler]}@${digest[reconciler]}"
