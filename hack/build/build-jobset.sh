#!/usr/bin/env bash
# Builds the JobSet controller, sigs.k8s.io/jobset, from the Go module proxy, for the e2e test of
# `python -m reconciler render --as jobset` only (tests/e2e/test_jobset.py; never shipped). Modelled on
# hack/build/build-kueue.sh: the downloaded module directory is copied to a writable place and its root
# package (main.go) is built inside it (its go.mod has no replace directives). v0.12.0 is the newest version
# the proxy serves here (v0.13.0 is refused). Beside the binary it copies, from the same module, what the
# harness applies to the API server: the CRD (config/components/crd/bases), the admission webhook
# configurations (config/components/webhook/manifests.yaml, and the patches its kustomization applies: the pod
# webhooks' objectSelector on jobset.sigs.k8s.io/jobset-name). Cached beside the control-plane binaries, keyed
# by version; a second run with the binary and the manifests present does no work. Prints the binary's path
# as the last line of stdout; progress goes to stderr.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

JOBSET_VERSION="${JOBSET_VERSION:-v0.12.0}"
MODULE="sigs.k8s.io/jobset"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/jobset-$JOBSET_VERSION"
BIN="$OUT/bin/jobset"
CFG="$OUT/config"
DONE="$CFG/.complete"  # written last: the manifests of this script's version are all there

log() { printf '[build-jobset %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$BIN" && -f "$DONE" ]]; then echo "$BIN"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-jobset.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if [[ -x "$BIN" && -f "$DONE" ]]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$OUT/bin" "$OUT/logs"

module_source "$MODULE" "$JOBSET_VERSION" "$OUT"

rm -rf "$CFG"
mkdir -p "$CFG/crd" "$CFG/webhook/patches"
COMPONENTS="$SRC/config/components"
cp "$COMPONENTS"/crd/bases/*.yaml "$CFG/crd/"
cp "$COMPONENTS"/webhook/{manifests,kustomization}.yaml "$CFG/webhook/"
cp "$COMPONENTS"/webhook/patches/*.yaml "$CFG/webhook/patches/"
if [[ -x "$BIN" ]]; then
  touch "$DONE"
  log "copied the manifests of $MODULE@$JOBSET_VERSION beside the existing binary"
  echo "$BIN"
  exit 0
fi

cd "$SRC"
log "building the controller (CGO_ENABLED=0) ..."
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -v -o "$OUT/logs/jobset.time" go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN.tmp" . >&2
else
  go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN.tmp" . >&2
fi
mv "$BIN.tmp" "$BIN"
touch "$DONE"
log "built $BIN ($JOBSET_VERSION)"
echo "$BIN"
