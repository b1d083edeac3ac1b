#!/usr/bin/env bash
# Builds scheduler-plugins, sigs.k8s.io/scheduler-plugins, from the Go module proxy, for the gang-scheduling
# integration tests only (hack/devcluster/coscheduling.py, tests/integration/test_gang_scheduling.py; never
# shipped): ./cmd/scheduler (a kube-scheduler with the Coscheduling plugin) and ./cmd/controller (the PodGroup
# controller, which keeps a PodGroup's status). Modelled on hack/build/build-kueue.sh: the module's go.mod is
# not a plain `go install` target and its replace directives pin its Kubernetes libraries to versions, so
# the downloaded module directory is copied to a writable place and both commands are built inside it.
# Beside the binaries it copies, from the same module, its CRDs (config/crd/bases: PodGroup, ElasticQuota). Cached beside
# the control-plane binaries, keyed by version; a second run with both binaries and the CRD present does no
# work. Prints the directory holding bin/ and crd/ as the last line of stdout; progress goes to stderr.
set -euo pipefail
# shellcheck source=hack/build/gomodule.sh
source "$(dirname "$0")/gomodule.sh"

SCHEDULER_PLUGINS_VERSION="${SCHEDULER_PLUGINS_VERSION:-v0.34.7}"
# The Kubernetes libraries a release pins (v0.34.7 pins k8s.io/* v0.34.7 and k8s.io/kubernetes v1.34.7) are
# not all served by the module proxy: it answers 403 "This module version is not available" for
# k8s.io/csi-translation-lib, k8s.io/cluster-bootstrap and k8s.io/cri-api v0.34.7, among others. The copy's
# go.mod then pins every one of them to another patch release of the same minor that the proxy serves:
# SCHEDULER_PLUGINS_K8S_PATCH (34.4 for v0.34.7, so k8s.io/* v0.34.4 and k8s.io/kubernetes v1.34.4); empty
# builds the module as it pins them.
if [[ "$SCHEDULER_PLUGINS_VERSION" == v0.34.7 ]]; then
  SCHEDULER_PLUGINS_K8S_PATCH="${SCHEDULER_PLUGINS_K8S_PATCH-34.4}"
fi
MODULE="sigs.k8s.io/scheduler-plugins"
ROOT="${TESTBIN_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/testbin}"
OUT="$ROOT/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION"
DONE="$OUT/.complete"  # written last: both binaries and the CRD are there

log() { printf '[build-scheduler-plugins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [[ -f "$DONE" ]]; then echo "$OUT"; exit 0; fi

mkdir -p "$ROOT"
exec 9>"$ROOT/.build-scheduler-plugins.lock"
if command -v flock >/dev/null; then
  flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }
fi
if [[ -f "$DONE" ]]; then echo "$OUT"; exit 0; fi

command -v go >/dev/null || { log "error: Go is not installed (need go on PATH)"; exit 2; }
# shellcheck source=hack/build/goenv.sh
source "$(dirname "$0")/goenv.sh"
mkdir -p "$OUT/bin" "$OUT/logs"

module_source "$MODULE" "$SCHEDULER_PLUGINS_VERSION" "$OUT"

rm -rf "$OUT/crd"
mkdir -p "$OUT/crd"
cp "$SRC"/config/crd/bases/*.yaml "$OUT/crd/"  # PodGroup and ElasticQuota: the controller watches both

cd "$SRC"
if [[ -n "${SCHEDULER_PLUGINS_K8S_PATCH:-}" ]]; then
  pinned="${SCHEDULER_PLUGINS_VERSION#v0.}"
  log "go.mod: Kubernetes libraries ${pinned} -> ${SCHEDULER_PLUGINS_K8S_PATCH} (the proxy lacks some of ${pinned})"
  sed -i -E "s#(k8s\.io/[a-z0-9-]+ )v0\.${pinned//./\\.}#\1v0.${SCHEDULER_PLUGINS_K8S_PATCH}#g; \
s#(k8s\.io/kubernetes )v1\.${pinned//./\\.}#\1v1.${SCHEDULER_PLUGINS_K8S_PATCH}#g" go.mod
  if grep -qE "k8s\.io/[a-z0-9-]+ v[01]\.${pinned//./\\.}\b" go.mod; then
    log "error: go.mod still pins Kubernetes libraries at ${pinned}"; exit 4
  fi
fi
# The binary's version is that of its Kubernetes libraries: component-base checks its emulation version
# against it (with the scheduler-plugins tag, v0.34.7, the scheduler exits: "emulation version 0.34 is not
# between [1.31, 0.34.0]").
K8S_VERSION="v1.${SCHEDULER_PLUGINS_K8S_PATCH:-${SCHEDULER_PLUGINS_VERSION#v0.}}"
LDF="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
for cmd in scheduler controller; do
  if [[ -x "$OUT/bin/$cmd" ]]; then continue; fi
  log "building ./cmd/$cmd (CGO_ENABLED=0) ..."
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -v -o "$OUT/logs/$cmd.time" go build -mod=mod -trimpath -ldflags "$LDF" \
      -o "$OUT/bin/$cmd.tmp" "./cmd/$cmd" >&2
  else
    go build -mod=mod -trimpath -ldflags "$LDF" -o "$OUT/bin/$cmd.tmp" "./cmd/$cmd" >&2
  fi
  mv "$OUT/bin/$cmd.tmp" "$OUT/bin/$cmd"
done
touch "$DONE"
log "built $MODULE@$SCHEDULER_PLUGINS_VERSION (Kubernetes libraries $K8S_VERSION) in $OUT"
echo "$OUT"
