#!/usr/bin/env bash
# Builds cosign (github.com/sigstore/cosign/v2) from the Go module proxy, for `make release` to sign what it pushes
# (COSIGN_KEY, RELEASE.md) and tests/e2e/test_release.py to verify it (`make cosign`, in `make builds`' Go chain so
# that the e2e tier does not build it; the test still builds it on first use when run alone). Cached beside the control-plane binaries, keyed by version; a
# second run with the binary present does no work. Prints the binary's path as the last line of stdout; progress
# goes to stderr.
set -euo pipefail

COSIGN_VERSION="${COSIGN_VERSION:-v2.6.5}"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/cosign-$COSIGN_VERSION"
BIN="$OUT/bin/cosign"

log() { printf '[build-cosign %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
mkdir -p "$OUT/bin"
exec 9>"$ROOT/.build-cosign.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
log "building github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION from the module proxy (several minutes) ..."
began=$SECONDS
# go install: cosign's go.mod has no replace directives, so the module builds as a plain install target
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
GOBIN="$OUT/bin.tmp" go install -trimpath -ldflags "-s -w" "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION" >&2
mv "$OUT/bin.tmp/cosign" "$BIN"
rmdir "$OUT/bin.tmp"
log "built $BIN ($COSIGN_VERSION) in $((SECONDS - began)) s"
echo "$BIN"
