#!/usr/bin/env bash
# Builds Helm, helm.sh/helm/v4, from the Go module proxy, for the chart tests (tests/unit/test_chart.py) and
# for installing deploy/chart/mpi-operator from a checkout. Modelled on hack/build/build-kueue.sh: the
# downloaded module directory is copied to a writable place and ./cmd/helm is built inside it. Cached beside
# the control-plane binaries, keyed by version; a second run with the binary present does no work. Prints
# the binary's path as the last line of stdout; progress goes to stderr.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

HELM_VERSION="${HELM_VERSION:-v4.3.2}"
MODULE="helm.sh/helm/v4"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/helm-$HELM_VERSION"
BIN="$OUT/bin/helm"

log() { printf '[build-helm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-helm.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$OUT/bin" "$OUT/logs"

module_source "$MODULE" "$HELM_VERSION" "$OUT"

cd "$SRC"
log "building ./cmd/helm (CGO_ENABLED=0) ..."
COMMIT="$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", "unknown"))' <<<"$INFO")"
VPKG="$MODULE/internal/version"
LDF="-s -w -X $VPKG.version=$HELM_VERSION -X $VPKG.gitCommit=$COMMIT -X $VPKG.gitTreeState=clean"
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -v -o "$OUT/logs/helm.time" go build -mod=mod -trimpath -ldflags "$LDF" \
    -o "$BIN.tmp" ./cmd/helm >&2
else
  go build -mod=mod -trimpath -ldflags "$LDF" -o "$BIN.tmp" ./cmd/helm >&2
fi
mv "$BIN.tmp" "$BIN"
log "built $BIN ($HELM_VERSION, commit $COMMIT)"
echo "$BIN"
