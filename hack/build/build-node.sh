#!/usr/bin/env bash
# Builds what a real node next to the local control plane needs, into a version-keyed cache directory
# outside the checkout (like build-testbin.sh): kubelet from the same recorded k8s.io/kubernetes module
# as the control plane (hack/build/testbin/k8s) and CoreDNS from the Go module proxy (the pod sandbox image is
# made by build-images.sh). A second run with the binaries present does no work.
# The container runtime comes from Debian packages (containerd, runc, containernetworking-plugins),
# installed here when missing and we are root.
# Prints the bin directory as the last line of stdout; progress goes to stderr.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"
K8S_MINOR="$(cut -d. -f2 <<<"$K8S_VERSION")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator"
OUT="${NODE_ROOT:-$CACHE/node}/k8s-$K8S_VERSION.coredns-$COREDNS_VERSION"
BIN="$OUT/bin"
DEBS="containerd runc containernetworking-plugins iptables"

log() { printf '[build-node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
timed() {  # timed NAME CMD...: records wall time and peak RSS in $OUT/logs/NAME.time
  local name=$1; shift
  log "building $name ..."
  if [[ -x /usr/bin/time ]]; then /usr/bin/time -v -o "$OUT/logs/$name.time" "$@" >&2; else "$@" >&2; fi
}

missing_debs() { for p in $DEBS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"; done; }
# shellcheck disable=SC2086  # DEBS is a list of package names
[[ -z "$(missing_debs)" ]] || bash "$HERE/apt-install.sh" $DEBS

have_all() { for b in kubelet coredns; do [[ -x "$BIN/$b" ]] || return 1; done; }
if have_all; then echo "$BIN"; exit 0; fi
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
if have_all; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || { log "error: Go is not installed (need go >= 1.26 on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$HERE/goenv.sh"
mkdir -p "$BIN" "$OUT/src/k8s" "$OUT/logs"

if ! [[ -x "$BIN/kubelet" ]]; then
  grep -qsE "k8s.io/kubernetes ${K8S_VERSION}( |$)" "$HERE/testbin/k8s/go.mod" \
    || { log "error: hack/build/testbin/k8s does not record k8s.io/kubernetes $K8S_VERSION"; exit 3; }
  cp "$HERE/testbin/k8s/go.mod" "$HERE/testbin/k8s/go.sum" "$OUT/src/k8s/"
  LDF="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDF="$LDF -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    LDF="$LDF -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$OUT/src/k8s" && timed kubelet go build -mod=mod -trimpath -ldflags "$LDF" -o "$BIN/kubelet" \
    k8s.io/kubernetes/cmd/kubelet)
fi
if ! [[ -x "$BIN/coredns" ]]; then
  GOBIN="$BIN" timed coredns go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
fi
have_all || { log "error: some binaries are missing from $BIN"; exit 4; }
log "$("$BIN/kubelet" --version 2>&1 | head -1); $("$BIN/coredns" -version 2>&1 | head -1)"
echo "$BIN"
