# Sourced by hack/build/build-peer.sh, build-kueue.sh, build-scheduler-plugins.sh and build-helm.sh (which define log()):
# a module from the Go module proxy, copied to a writable place to be built inside it. The proxy's copy is read-only, and these
# modules' go.mod files are not plain `go install` targets.
#
# module_source MODULE VERSION OUT: sets INFO (the `go mod download -json` answer) and SRC (OUT/src).
module_source() {
  local module="$1" version="$2" out="$3" dir
  log "downloading $module@$version from the module proxy ..."
  if ! INFO="$(go mod download -json "$module@$version" 2>"$out/logs/download.err")"; then
    log "error: the Go module proxy does not serve $module@$version:"; cat "$out/logs/download.err" >&2
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("Error", ""))' <<<"$INFO" >&2 || true  # -json: the error is in the answer
    exit 3
  fi
  dir="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$INFO")"
  SRC="$out/src"
  rm -rf "$SRC"
  cp -r "$dir" "$SRC"
  chmod -R u+w "$SRC"
  if grep -qE '^\s*replace\b' "$SRC/go.mod"; then
    log "warning: $module@$version's go.mod has replace directives; building it as it is"
  fi
}
