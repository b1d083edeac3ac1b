#!/usr/bin/env bash
# `make release VERSION=x.y.z REGISTRY=host[:port][/path] [INSECURE=1] [UNCHECKED=1]`: cuts release x.y.z
# (RELEASE.md). It refuses unless VERSION is the project's one version (pyproject.toml's `version`), CHANGELOG.md
# has a `## x.y.z` (or `## [x.y.z]`) section and the checkout is clean; then
#   1. builds both images for this machine's architecture (build-operator-images.sh: buildah, as `make images`),
#      labels them with the version (org.opencontainers.image.*, so each release's images have digests of their
#      own) and pushes them as $REGISTRY/mpijob-webhook:x.y.z and $REGISTRY/mpijob-reconciler:x.y.z;
#   2. packages the chart (`helm package`, version and appVersion x.y.z, image repositories set to the pushed
#      ones; the tags default to appVersion) and pushes it with `helm push` to oci://$REGISTRY/charts;
#   3. pushes a software bill of materials of each image (hack/build/sbom.py: SPDX JSON of its Debian and Python
#      packages) beside it, tagged sha256-<image digest hex>.sbom;
#   4. with COSIGN_KEY, signs each of them with cosign (build-cosign.sh), the signatures pushed beside them;
#   5. prints each image's, SBOM's and the chart's digest, and the architectures built (arm64 is not: RELEASE.md).
#
#   VERSION    required: x.y.z[-pre] (SemVer, as Helm requires of a chart version)
#   REGISTRY   required: host[:port][/path]; `skopeo login`/`helm registry login` first where it needs credentials
#   INSECURE   1: the registry speaks plain HTTP or has an untrusted certificate (a local test registry)
#   UNCHECKED  1: skip the three checks (version source, CHANGELOG section, clean checkout): test releases only
#   COSIGN_KEY a cosign private key (`cosign generate-key-pair`; its password in COSIGN_PASSWORD): sign the release
# stdout: the summary, ending with the lines `webhook=<ref>@<digest>`, `reconciler=<ref>@<digest>`,
# `chart=oci://<registry>/charts/mpi-operator:<version>@<digest>`, `webhook-sbom=<ref>@<digest>` and
# `reconciler-sbom=<ref>@<digest>`; progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { printf '[release %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
usage="usage: make release VERSION=x.y.z REGISTRY=host[:port][/path] [INSECURE=1] [UNCHECKED=1]"

VERSION="${VERSION:-}"
REGISTRY="${REGISTRY:-}"
REGISTRY="${REGISTRY%/}"
if ! [[ "$VERSION" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "VERSION=$VERSION is not x.y.z[-pre]; $usage" >&2; exit 2
fi
if [[ -z "$REGISTRY" || "$REGISTRY" == *://* || "$REGISTRY" == *[[:space:]]* ]]; then
  echo "REGISTRY is required, without a scheme; $usage" >&2; exit 2
fi

# The checks: the version is the project's, it has release notes, and what is built is what is committed.
source_version="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$ROOT/pyproject.toml")"
problems=()
[[ "$VERSION" == "$source_version" ]] || \
  problems+=("VERSION=$VERSION is not pyproject.toml's version $source_version (change it there, then \`make chart\`)")
grep -Eq "^## \[?${VERSION//./\\.}\]?([[:space:]]|$)" "$ROOT/CHANGELOG.md" || \
  problems+=("CHANGELOG.md has no '## $VERSION' (or '## [$VERSION]') section")
[[ -z "$(git -C "$ROOT" status --porcelain)" ]] || problems+=("the checkout has uncommitted changes (git status)")
if (( ${#problems[@]} )); then
  if [[ "${UNCHECKED:-}" == 1 ]]; then
    for p in "${problems[@]}"; do log "UNCHECKED=1, going on although: $p"; done
  else
    printf 'release %s refused:\n' "$VERSION" >&2; printf '  - %s\n' "${problems[@]}" >&2; exit 1
  fi
fi

command -v buildah >/dev/null || bash "$HERE/apt-install.sh" buildah
command -v skopeo >/dev/null || bash "$HERE/apt-install.sh" skopeo
helm="$(bash "$HERE/build-helm.sh" | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tls=(--tls-verify=true); helm_tls=()
[[ "${INSECURE:-}" == 1 ]] && { tls=(--tls-verify=false); helm_tls=(--plain-http); }
revision="$(git -C "$ROOT" rev-parse HEAD)"
arch="$(buildah info --format '{{.host.arch}}' 2>/dev/null || dpkg --print-architecture)"

# FILE pushed as a one-layer OCI artifact of MEDIA_TYPE to REFERENCE (an OCI image layout written here, copied
# by skopeo), its manifest's digest written to DIGEST_FILE.
push_artifact() {
  local file=$1 media_type=$2 reference=$3 digest_file=$4 layout config layer manifest
  layout="$(mktemp -d -p "$work")"; mkdir -p "$layout/blobs/sha256"
  blob() { local h; h="$(sha256sum "$1" | cut -d' ' -f1)"; cp "$1" "$layout/blobs/sha256/$h"; echo "$h"; }
  printf '{}' >"$layout/config"; config="$(blob "$layout/config")"; layer="$(blob "$file")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"%s",%s,%s}' \
    "$media_type" \
    "\"config\":{\"mediaType\":\"application/vnd.oci.empty.v1+json\",\"digest\":\"sha256:$config\",\"size\":2}" \
    "\"layers\":[{\"mediaType\":\"$media_type\",\"digest\":\"sha256:$layer\",\"size\":$(stat -c %s "$file"),\"annotations\":{\"org.opencontainers.image.title\":\"$(basename "$file")\"}}]" \
    >"$layout/manifest"
  manifest="$(blob "$layout/manifest")"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"artifact"}}]}' \
    "$manifest" "$(stat -c %s "$layout/manifest")" >"$layout/index.json"
  log "skopeo copy $(basename "$file") -> $reference"
  skopeo copy --quiet --preserve-digests "--dest-${tls[0]#--}" --digestfile "$digest_file" \
    "oci:$layout:artifact" "docker://$reference" >&2
}

# 1. The images: the cached build of this checkout, with the release's labels, pushed under the version's tag.
images="$(bash "$HERE/build-operator-images.sh" | tail -1)"
declare -A ref digest sbom sbom_digest
for component in webhook reconciler; do
  archive="$(ls -t "$images"/operator-"$component"-*.tar | head -1)"
  ref[$component]="$REGISTRY/mpijob-$component:$VERSION"
  local_name="localhost/mpijob-operator/$component:release-$VERSION"
  container="$(buildah from --quiet --pull=never "docker-archive:$archive")"
  buildah config --label "org.opencontainers.image.version=$VERSION" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.title=mpijob-$component" "$container" >&2
  buildah commit --quiet --rm "$container" "$local_name" >/dev/null
  log "buildah push $local_name -> ${ref[$component]}"
  buildah push --quiet "${tls[@]}" --digestfile "$work/$component.digest" "$local_name" \
    "docker://${ref[$component]}" >&2
  buildah rmi "$local_name" >/dev/null
  digest[$component]="$(cat "$work/$component.digest")"
  # Its software bill of materials (hack/build/sbom.py, SPDX JSON), pushed beside it as an OCI artifact under
  # the tag sha256-<hex>.sbom (cosign's convention for what belongs to a digest).
  sbom_file="$work/mpijob-$component-$VERSION.spdx.json"
  (cd "$ROOT" && python3 -m hack.build.sbom --archive "$archive" --image "${ref[$component]}" \
    --digest "${digest[$component]}" --out "$sbom_file")
  sbom[$component]="$REGISTRY/mpijob-$component:${digest[$component]/:/-}.sbom"
  push_artifact "$sbom_file" application/spdx+json "${sbom[$component]}" "$work/$component.sbom.digest"
  sbom_digest[$component]="$(cat "$work/$component.sbom.digest")"
done

# Only this machine's architecture: the images' base (build-images.sh) is a Debian tree made by mmdebstrap for
# the host's architecture, so another architecture needs its own base built under emulation (RELEASE.md).
other=$([[ "$arch" == arm64 ]] && echo amd64 || echo arm64)
qemu=$([[ "$other" == arm64 ]] && echo aarch64 || echo x86_64)
if [[ -r /proc/sys/fs/binfmt_misc/qemu-$qemu ]] && grep -q '^enabled' "/proc/sys/fs/binfmt_misc/qemu-$qemu"; then
  why="this machine can emulate $other (qemu-$qemu), but the Python base image is built for $arch only (RELEASE.md)"
else
  why="this machine cannot run $other binaries (no qemu-$qemu binfmt_misc entry: qemu-user-static, RELEASE.md)"
fi

# 2. The chart: the checkout's, with the pushed repositories as defaults, packaged and pushed as an OCI artifact.
cp -r "$ROOT/deploy/chart/mpi-operator" "$work/mpi-operator"
for component in webhook reconciler; do
  sed -i "s|^    repository: mpijob-operator/$component\$|    repository: $REGISTRY/mpijob-$component|" \
    "$work/mpi-operator/values.yaml"
  grep -q "^    repository: $REGISTRY/mpijob-$component\$" "$work/mpi-operator/values.yaml" || {
    echo "values.yaml: no '    repository: mpijob-operator/$component' line to set" >&2; exit 1; }
done
"$helm" package "$work/mpi-operator" --version "$VERSION" --app-version "$VERSION" -d "$work" >&2
log "helm push mpi-operator-$VERSION.tgz oci://$REGISTRY/charts"
pushed="$("$helm" push "$work/mpi-operator-$VERSION.tgz" "oci://$REGISTRY/charts" "${helm_tls[@]}" 2>&1)"
echo "$pushed" >&2
chart_digest="$(sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/p' <<<"$pushed")"
[[ -n "$chart_digest" ]] || { echo "helm push printed no digest" >&2; exit 1; }
chart="oci://$REGISTRY/charts/mpi-operator:$VERSION"

# 4. Signatures, with COSIGN_KEY: cosign (build-cosign.sh, from the Go module proxy) signs each image's, SBOM's and
# the chart's digest with that key, the signatures pushed beside them (tags sha256-<hex>.sig); no transparency log
# upload (a private key of the maintainers; verify with `cosign verify --key cosign.pub --insecure-ignore-tlog`).
signed="Not signed (no COSIGN_KEY; RELEASE.md)."
if [[ -n "${COSIGN_KEY:-}" ]]; then
  cosign="$(bash "$HERE/build-cosign.sh" | tail -1)"
  sign_flags=(--yes --key "$COSIGN_KEY" --tlog-upload=false)
  [[ "${INSECURE:-}" == 1 ]] && sign_flags+=(--allow-insecure-registry --allow-http-registry)
  for target in "${ref[webhook]%:*}@${digest[webhook]}" "${ref[reconciler]%:*}@${digest[reconciler]}" \
      "${sbom[webhook]%:*}@${sbom_digest[webhook]}" "${sbom[reconciler]%:*}@${sbom_digest[reconciler]}" \
      "$REGISTRY/charts/mpi-operator@$chart_digest"; do
    log "cosign sign $target"
    COSIGN_PASSWORD="${COSIGN_PASSWORD:-}" "$cosign" sign "${sign_flags[@]}" "$target" >&2
  done
  signed="Signed with $COSIGN_KEY (cosign): the images, their SBOMs and the chart."
fi

plain=""; [[ "${INSECURE:-}" == 1 ]] && plain=" --plain-http"
cat <<EOF
Released $VERSION (commit $revision):
  ${ref[webhook]}  (${digest[webhook]})
  ${ref[reconciler]}  (${digest[reconciler]})
  $chart  (${chart_digest})
SBOMs (SPDX JSON, beside each image):
  ${sbom[webhook]}  (${sbom_digest[webhook]})
  ${sbom[reconciler]}  (${sbom_digest[reconciler]})
$signed
Architectures: linux/$arch only; linux/$other not built: $why.

Install it (docs/operator-guide.md#install-a-released-version):
  helm install mpi-operator oci://$REGISTRY/charts/mpi-operator --version $VERSION$plain

webhook=${ref[webhook]}@${digest[webhook]}
reconciler=${ref[reconciler]}@${digest[reconciler]}
chart=$chart@$chart_digest
webhook-sbom=${sbom[webhook]}@${sbom_digest[webhook]}
reconciler-sbom=${sbom[reconciler]}@${sbom_digest[reconciler]}
EOF
