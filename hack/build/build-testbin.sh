#!/usr/bin/env bash
# Builds the local control plane from pinned Go modules (the Go module proxy only):
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes,
# etcd from go.etcd.io/etcd/server/v3 and kwok from sigs.k8s.io/kwok, into a version-keyed
# cache directory outside the checkout. A second run with the binaries present does no work.
# Prints the bin directory as the last line of stdout; progress goes to stderr.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"     # fallback: K8S_VERSION=v1.35.4
ETCD_VERSION="${ETCD_VERSION:-v3.6.14}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
K8S_MINOR="$(cut -d. -f2 <<<"$K8S_VERSION")"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PINNED="$HERE/testbin"   # go.mod/go.sum recorded by the first green build of the default versions
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/k8s-$K8S_VERSION.etcd-$ETCD_VERSION.kwok-$KWOK_VERSION"
BIN="$OUT/bin"
NEED="kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok"

log() { printf '[build-testbin %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
have_all() { for b in $NEED; do [[ -x "$BIN/$b" ]] || return 1; done; }

if have_all; then echo "$BIN"; exit 0; fi

# One build at a time per cache directory: a second caller waits, then finds the binaries.
mkdir -p "$ROOT"
exec 9>"$ROOT/.build.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if have_all; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go >= 1.26 on PATH)"; exit 2; }
GO_MINOR="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if (( GO_MINOR < 26 )); then log "error: $(go env GOVERSION) is too old: need go >= 1.26"; exit 2; fi

# shellcheck source=hack/build/goenv.sh
source "$HERE/goenv.sh"
mkdir -p "$BIN" "$OUT/src/k8s" "$OUT/src/etcd" "$OUT/logs"

timed() {  # timed NAME CMD...: runs CMD, records wall time and peak RSS in $OUT/logs/NAME.time
  local name=$1; shift
  log "building $name ..."
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -v -o "$OUT/logs/$name.time" "$@" >&2
  else
    "$@" >&2
  fi
}

require_version() {  # require_version MODULE VERSION: fail early and clearly if the proxy lacks it
  if ! go mod download -json "$1@$2" >/dev/null 2>"$OUT/logs/download.err"; then
    log "error: the Go module proxy does not serve $1@$2:"; cat "$OUT/logs/download.err" >&2
    exit 3
  fi
}

# ---- 1. Kubernetes binaries, from a wrapper module whose replace list comes from k/k's go.mod
if ! [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/kube-scheduler" && -x "$BIN/kubectl" ]]; then
  cd "$OUT/src/k8s"
  require_version k8s.io/kubernetes "$K8S_VERSION"
  CMDS="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl"
  if grep -qsE "k8s.io/kubernetes ${K8S_VERSION}( |$)" "$PINNED/k8s/go.mod"; then
    log "k8s $K8S_VERSION: using the recorded go.mod/go.sum (hack/build/testbin/k8s)"
    cp "$PINNED/k8s/go.mod" "$PINNED/k8s/go.sum" .
  else
    [[ -f go.mod ]] || go mod init mpijob-testbin.local/k8s >&2
    go mod edit -go=1.26.0
    KK_GOMOD="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    STAGING="$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$KK_GOMOD" | sort -u)"
    log "k8s $K8S_VERSION: $(wc -w <<<"$STAGING") staging modules at $STAGING_VERSION"
    for m in $STAGING; do
      require_version "$m" "$STAGING_VERSION"
      go mod edit -replace="$m=$m@$STAGING_VERSION"
    done
    go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
    log "resolving the module graph (go get) ..."
    go get $(for c in $CMDS; do printf '%s@%s ' "$c" "$K8S_VERSION"; done) >&2
  fi
  LDF="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDF="$LDF -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    LDF="$LDF -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for c in $CMDS; do
    timed "$(basename "$c")" go build -mod=mod -trimpath -ldflags "$LDF" -o "$BIN/$(basename "$c")" "$c"
  done
fi

# ---- 2. etcd, from a wrapper module (go install fails on etcd's replace directives)
if ! [[ -x "$BIN/etcd" ]]; then
  cd "$OUT/src/etcd"
  require_version go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  if grep -qsE "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}( |$)" "$PINNED/etcd/go.mod"; then
    cp "$PINNED/etcd/go.mod" "$PINNED/etcd/go.sum" .
  else
    [[ -f go.mod ]] || go mod init mpijob-testbin.local/etcd >&2
    go mod edit -go=1.25.0
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  fi
  timed etcd go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
fi

# ---- 3. kwok (no replace directives: plain go install)
if ! [[ -x "$BIN/kwok" ]]; then
  require_version sigs.k8s.io/kwok "$KWOK_VERSION"
  GOBIN="$BIN" timed kwok go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

have_all || { log "error: some binaries are missing from $BIN"; exit 4; }
for b in kube-apiserver etcd kwok; do log "$("$BIN/$b" --version 2>&1 | head -1)"; done
echo "$BIN"
