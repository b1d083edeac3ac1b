#!/usr/bin/env bash
# Builds cert-manager (github.com/cert-manager/cert-manager) from the Go module proxy: its controller, cainjector
# and webhook, for the e2e test of the default certificate path only (hack/devcluster/cert_manager.py,
# tests/e2e/test_cert_manager.py; never shipped). Modelled on hack/build/build-kueue.sh: the downloaded module
# directory is copied to a writable place and the three main packages are built inside it, in one `go build`
# (they share most of their packages, so one invocation compiles them once).
#
# The version: v1.11.5, the newest release whose module on the proxy still holds the main packages. From v1.12.0
# on, cmd/controller, cmd/cainjector and cmd/webhook are modules of their own (controller-binary, ...) whose
# paths are not under a directory of the repository's name, so the proxy serves no copy of them, and the module
# github.com/cert-manager/cert-manager@v1.19.x (which the proxy does serve) has no cmd/ at all. v1.11.5's go.mod
# has one replace directive (github.com/miekg/dns), honoured as it is.
#
# Beside the binaries it writes, from the same module, the CRDs (deploy/crds): there they are Helm templates
# whose only templated lines are the labels, so they are made plain YAML here (the chart's labels with the
# release name "cert-manager"). Cached beside the control-plane binaries, keyed by version; a second run with the
# binaries and the CRDs present does no work. Prints the directory of the binaries as the last line of stdout;
# progress goes to stderr, and the build's wall time to stderr and to OUT/logs/build.seconds.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.11.5}"
MODULE="github.com/cert-manager/cert-manager"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/cert-manager-$CERT_MANAGER_VERSION"
BINDIR="$OUT/bin"
CFG="$OUT/config"
DONE="$CFG/.complete"  # written last: the CRDs of this script's version are all there
BINS=(controller cainjector webhook)

log() { printf '[build-cert-manager %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

built() { local b; for b in "${BINS[@]}"; do [[ -x "$BINDIR/$b" ]] || return 1; done; }

if built && [[ -f "$DONE" ]]; then echo "$BINDIR"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-cert-manager.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if built && [[ -f "$DONE" ]]; then echo "$BINDIR"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$BINDIR" "$OUT/logs"

module_source "$MODULE" "$CERT_MANAGER_VERSION" "$OUT"
for b in "${BINS[@]}"; do
  [[ -f "$SRC/cmd/$b/main.go" ]] || {
    log "error: $MODULE@$CERT_MANAGER_VERSION has no cmd/$b/main.go (from v1.12.0 on the binaries are modules the proxy does not serve)"
    exit 3
  }
done

# The CRDs first (cheap): the templated label lines become plain labels.
rm -rf "$CFG"
mkdir -p "$CFG/crd"
for f in "$SRC"/deploy/crds/crd-*.yaml; do
  sed -e "s|'{{ template \"cert-manager.name\" . }}'|cert-manager|" \
      -e "s|'{{ .Release.Name }}'|cert-manager|" \
      -e '/# Generated labels {{/d' "$f" >"$CFG/crd/$(basename "$f")"
  if grep -q '{{' "$CFG/crd/$(basename "$f")"; then
    log "error: $(basename "$f") still has template lines after the label rewrite:"
    grep -n '{{' "$CFG/crd/$(basename "$f")" >&2
    exit 4
  fi
done
COMMIT="$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", ""))' <<<"$INFO")"
if built; then
  touch "$DONE"
  log "wrote the CRDs of $MODULE@$CERT_MANAGER_VERSION beside the existing binaries"
  echo "$BINDIR"
  exit 0
fi

cd "$SRC"
log "building ./cmd/{controller,cainjector,webhook} in one go build (CGO_ENABLED=0) ..."
VPKG="$MODULE/pkg/util"
LDF="-s -w -X $VPKG.AppVersion=$CERT_MANAGER_VERSION -X $VPKG.AppGitCommit=$COMMIT"
TMP="$OUT/bin.tmp"
rm -rf "$TMP"
mkdir -p "$TMP"
began=$(date +%s)
if [[ -x /usr/bin/time ]]; then
  /usr/bin/time -v -o "$OUT/logs/build.time" go build -mod=mod -trimpath -ldflags "$LDF" -o "$TMP/" \
    ./cmd/controller ./cmd/cainjector ./cmd/webhook >&2
else
  go build -mod=mod -trimpath -ldflags "$LDF" -o "$TMP/" ./cmd/controller ./cmd/cainjector ./cmd/webhook >&2
fi
seconds=$(( $(date +%s) - began ))
echo "$seconds" >"$OUT/logs/build.seconds"
for b in "${BINS[@]}"; do mv "$TMP/$b" "$BINDIR/$b"; done
rmdir "$TMP"
touch "$DONE"
log "built controller, cainjector and webhook in $BINDIR ($CERT_MANAGER_VERSION, commit ${COMMIT:-unknown}) in ${seconds}s"
echo "$BINDIR"
