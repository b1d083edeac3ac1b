#!/usr/bin/env bash
# Builds the upstream Go operator, github.com/kubeflow/mpi-operator, from the Go module proxy, for the
# peer benchmark (hack/bench/peer/__main__.py) and the handover test (tests/integration/test_handover.py); never
# shipped. The proxy refuses `go install ...@v0.8.2` (the module's go.mod is not a plain main-module
# install target), so the downloaded module directory is copied to a writable place and ./cmd/mpi-operator
# is built inside it (its go.mod has no replace directives). The binary is cached beside the control-plane binaries, keyed by version; a second run
# with the binary present does no work. Prints the binary's path as the last line of stdout; progress
# goes to stderr.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

PEER_VERSION="${PEER_VERSION:-v0.8.2}"
MODULE="github.com/kubeflow/mpi-operator"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/mpi-operator-$PEER_VERSION"
BIN="$OUT/bin/mpi-operator"

log() { printf '[build-peer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-peer.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$OUT/bin" "$OUT/logs"

module_source "$MODULE" "$PEER_VERSION" "$OUT"

cd "$SRC"
log "building ./cmd/mpi-operator (CGO_ENABLED=0) ..."
LDF="-s -w -X $MODULE/pkg/version.GitSHA=$PEER_VERSION -X $MODULE/pkg/version.Version=$PEER_VERSION"
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -v -o "$OUT/logs/mpi-operator.time" go build -mod=mod -trimpath -ldflags "$LDF" \
    -o "$BIN.tmp" ./cmd/mpi-operator >&2
else
  go build -mod=mod -trimpath -ldflags "$LDF" -o "$BIN.tmp" ./cmd/mpi-operator >&2
fi
mv "$BIN.tmp" "$BIN"
log "built $("$BIN" --version 2>&1 | head -1 || true)"
echo "$BIN"
