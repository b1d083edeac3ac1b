#!/usr/bin/env bash
# Builds Kueue, sigs.k8s.io/kueue, from the Go module proxy, for the Kueue integration tests only
# (hack/devcluster/kueue.py, tests/integration/test_kueue.py; never shipped). Modelled on
# hack/build/build-peer.sh: the module's go.mod is not a plain `go install` target, so the downloaded module
# directory is copied to a writable place and ./cmd/kueue is built inside it (its go.mod has no replace
# directives). Beside the binary it copies, from the same module, what the harness applies to the test
# API server: the CRDs (config/components/crd/bases), the conversion-webhook patches
# (config/components/crd/patches) and the admission webhook configurations
# (config/components/webhook/manifests.yaml, and its kustomization.yaml for the namespace selector it
# patches in) and the RBAC the manager runs under (config/components/rbac: its ClusterRole, its Role
# for Secrets, the metrics authentication ClusterRole); the harness rewrites the webhooks to reach the
# local process by URL. Cached beside the control-plane binaries, keyed by version; a second run with
# the binary and the manifests present does no work (with the binary alone, it copies the manifests
# again). Prints the binary's path as the last line of stdout; progress goes to stderr.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

KUEUE_VERSION="${KUEUE_VERSION:-v0.19.2}"
MODULE="sigs.k8s.io/kueue"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/kueue-$KUEUE_VERSION"
BIN="$OUT/bin/kueue"
CFG="$OUT/config"
DONE="$CFG/.complete"  # written last: the manifests of this script's version are all there

log() { printf '[build-kueue %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$BIN" && -f "$DONE" ]]; then echo "$BIN"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-kueue.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if [[ -x "$BIN" && -f "$DONE" ]]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$OUT/bin" "$OUT/logs"

module_source "$MODULE" "$KUEUE_VERSION" "$OUT"

# The manifests first (cheap), so that a build that fails later still leaves them for inspection.
rm -rf "$CFG"
mkdir -p "$CFG/crd" "$CFG/crd-patches" "$CFG/webhook" "$CFG/rbac"
COMPONENTS="$SRC/config/components"
cp "$COMPONENTS"/crd/bases/*.yaml "$CFG/crd/"
cp "$COMPONENTS"/crd/patches/webhook_in_*.yaml "$COMPONENTS/crd/kustomization.yaml" "$CFG/crd-patches/"
cp "$COMPONENTS"/webhook/{manifests,kustomization}.yaml "$CFG/webhook/"
cp "$COMPONENTS"/rbac/{role,manager_secrets_role,metrics_auth_role}.yaml "$CFG/rbac/"
COMMIT="$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", "unknown"))' <<<"$INFO")"
if [[ -x "$BIN" ]]; then
  touch "$DONE"
  log "copied the manifests of $MODULE@$KUEUE_VERSION beside the existing binary"
  echo "$BIN"
  exit 0
fi

cd "$SRC"
log "building ./cmd/kueue (CGO_ENABLED=0) ..."
VPKG="$MODULE/pkg/version"
LDF="-s -w -X $VPKG.GitVersion=$KUEUE_VERSION -X $VPKG.GitCommit=$COMMIT"
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -v -o "$OUT/logs/kueue.time" go build -mod=mod -trimpath -ldflags "$LDF" \
    -o "$BIN.tmp" ./cmd/kueue >&2
else
  go build -mod=mod -trimpath -ldflags "$LDF" -o "$BIN.tmp" ./cmd/kueue >&2
fi
mv "$BIN.tmp" "$BIN"
touch "$DONE"
log "built $BIN ($KUEUE_VERSION, commit $COMMIT)"
echo "$BIN"
