#!/usr/bin/env bash
# `make release VERSION=x.y.z REGISTRY=host[:port][/path] [PLATFORMS=linux/amd64,linux/arm64] [INSECURE=1]
# [UNCHECKED=1]`: cuts release x.y.z (RELEASE.md). It refuses unless VERSION is the project's one version
# (pyproject.toml's `version`), CHANGELOG.md has a `## x.y.z` (or `## [x.y.z]`) section and the checkout is clean; then
#   1. builds both images for each platform (build-operator-images.sh ARCH: buildah, as `make images`; the host's
#      natively, the other under emulation: ensure-binfmt.sh, qemu-user-static), labels them with the version
#      (org.opencontainers.image.*, so each release's images have digests of their own) and pushes, per component,
#      an image index listing one image per platform (`buildah manifest push --all`, OCI) as
#      $REGISTRY/mpijob-webhook:x.y.z and $REGISTRY/mpijob-reconciler:x.y.z;
#   2. packages the chart (`helm package`, version and appVersion x.y.z, image repositories set to the pushed
#      ones; the tags default to appVersion) and pushes it with `helm push` to oci://$REGISTRY/charts;
#   3. pushes a software bill of materials of each platform's image (hack/build/sbom.py: SPDX JSON of its Debian
#      and Python packages) beside it, tagged sha256-<that image's digest hex>.sbom;
#   4. with COSIGN_KEY, signs with cosign (build-cosign.sh) each index and, recursively, each platform's image, each
#      SBOM and the chart, the signatures pushed beside them;
#   5. prints every digest: each index's, each platform's image's, each SBOM's and the chart's.
#
#   VERSION    required: x.y.z[-pre] (SemVer, as Helm requires of a chart version)
#   REGISTRY   required: host[:port][/path]; `skopeo login`/`helm registry login` first where it needs credentials
#   PLATFORMS  comma-separated, of linux/amd64 and linux/arm64; by default both where this machine runs the other
#              architecture's binaries or can be made to (as root: qemu-user-static installed and its binfmt_misc
#              handler registered, ensure-binfmt.sh), else the host's alone, the output saying why. A platform
#              named here that cannot be built fails the release.
#   INSECURE   1: the registry speaks plain HTTP or has an untrusted certificate (a local test registry)
#   UNCHECKED  1: skip the three checks (version source, CHANGELOG section, clean checkout): test releases only
#   COSIGN_KEY a cosign private key (`cosign generate-key-pair`; its password in COSIGN_PASSWORD): sign the release
# stdout: the summary, ending with the lines `webhook=<ref>@<index digest>`, `reconciler=<ref>@<index digest>`,
# `chart=oci://<registry>/charts/mpi-operator:<version>@<digest>`, then for each component and each platform in
# PLATFORMS' order `<component>-<arch>=<repository>@<digest>` and `<component>-<arch>-sbom=<ref>@<digest>`; progress
# goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { printf '[release %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
usage="usage: make release VERSION=x.y.z REGISTRY=host[:port][/path] [PLATFORMS=linux/amd64,linux/arm64]"
usage+=" [INSECURE=1] [UNCHECKED=1] [COSIGN_KEY=...]"

VERSION="${VERSION:-}"
REGISTRY="${REGISTRY:-}"
REGISTRY="${REGISTRY%/}"
PLATFORMS="${PLATFORMS:-}"
if ! [[ "$VERSION" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "VERSION=$VERSION is not x.y.z[-pre]; $usage" >&2; exit 2
fi
if [[ -z "$REGISTRY" || "$REGISTRY" == *://* || "$REGISTRY" == *[[:space:]]* ]]; then
  echo "REGISTRY is required, without a scheme; $usage" >&2; exit 2
fi
arches=()  # PLATFORMS' architectures, in its order; none: the default, decided below
if [[ -n "$PLATFORMS" ]]; then
  IFS=, read -ra requested <<<"$PLATFORMS,"  # the comma: a trailing empty entry is one too
  for platform in "${requested[@]}"; do
    case "$platform" in
      linux/amd64|linux/arm64) ;;
      *) echo "PLATFORMS=$PLATFORMS: '$platform' is not linux/amd64 or linux/arm64; $usage" >&2; exit 2 ;;
    esac
    if [[ " ${arches[*]} " == *" ${platform#linux/} "* ]]; then
      echo "PLATFORMS=$PLATFORMS names $platform twice; $usage" >&2; exit 2
    fi
    arches+=("${platform#linux/}")
  done
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
host="$(dpkg --print-architecture)"

# The platforms: those asked for, each runnable here (ensure-binfmt.sh registers qemu's handler when it can), or by
# default the host's and the other one where this machine can run its binaries, the reason written down where not.
not_built=""
if (( ${#arches[@]} )); then
  for a in "${arches[@]}"; do
    bash "$HERE/ensure-binfmt.sh" "$a" || {
      echo "PLATFORMS=$PLATFORMS: linux/$a cannot be built on this machine (above; RELEASE.md)" >&2; exit 1; }
  done
else
  for a in amd64 arm64; do
    if why="$(bash "$HERE/ensure-binfmt.sh" "$a" 2>&1)"; then
      arches+=("$a")
    else
      not_built+="${not_built:+; }linux/$a not built: $(tail -1 <<<"$why") (RELEASE.md)"; log "$not_built"
    fi
  done
  (( ${#arches[@]} )) || { echo "release: no platform can be built on this machine: $not_built" >&2; exit 1; }
fi
expect="$(IFS=,; echo "${arches[*]}")"
platforms="linux/${expect//,/, linux/}"
log "platforms: $platforms (this machine: linux/$host)"

helm="$(bash "$HERE/build-helm.sh" | tail -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tls=(--tls-verify=true); helm_tls=()
[[ "${INSECURE:-}" == 1 ]] && { tls=(--tls-verify=false); helm_tls=(--plain-http); }
revision="$(git -C "$ROOT" rev-parse HEAD)"

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

# 1. The images: per platform, the cached build of this checkout (build-operator-images.sh ARCH) with the release's
# labels; per component, an image index of them pushed under the version's tag (buildah manifest push --all, OCI),
# then read back from the registry for the digest of each platform's image (the push compresses the layers: those
# digests exist only once pushed) and checked to list exactly the platforms built.
declare -A ref digest archive arch_digest sbom sbom_digest took
for a in "${arches[@]}"; do
  began=$SECONDS
  images="$(bash "$HERE/build-operator-images.sh" "$a" | tail -1)"
  took[$a]=$((SECONDS - began))
  suffix=$([[ "$a" == "$host" ]] || echo "-$a")
  for component in webhook reconciler; do
    archive[$component/$a]="$(ls -t "$images/operator-$component$suffix-"????????????.tar | head -1)"
  done
done
for component in webhook reconciler; do
  ref[$component]="$REGISTRY/mpijob-$component:$VERSION"
  list="localhost/mpijob-operator/$component:release-$VERSION"
  buildah manifest rm "$list" >/dev/null 2>&1 || true  # left by an interrupted release
  buildah manifest create "$list" >/dev/null
  for a in "${arches[@]}"; do
    container="$(buildah from --quiet --pull=never --arch "$a" "docker-archive:${archive[$component/$a]}")"
    # --arch: the platform the index will list, whatever the base image's config said (image_archive.py writes
    # amd64 for the host's, so that an arm64 host's images say arm64 only from here on)
    buildah config --arch "$a" --os linux --label "org.opencontainers.image.version=$VERSION" \
      --label "org.opencontainers.image.revision=$revision" \
      --label "org.opencontainers.image.title=mpijob-$component" "$container" >&2
    buildah commit --quiet --rm "$container" "$list-$a" >/dev/null
    buildah manifest add "$list" "containers-storage:$list-$a" >/dev/null
  done
  log "buildah manifest push --all $list ($platforms) -> ${ref[$component]}"
  buildah manifest push --all --quiet --format oci "${tls[@]}" --digestfile "$work/$component.digest" "$list" \
    "docker://${ref[$component]}" >&2
  buildah manifest rm "$list" >/dev/null
  for a in "${arches[@]}"; do buildah rmi "$list-$a" >/dev/null; done
  digest[$component]="$(cat "$work/$component.digest")"
  [[ "${digest[$component]}" == sha256:* ]] || {
    echo "buildah manifest push wrote no digest for ${ref[$component]} (is the registry there?)" >&2; exit 1; }
  skopeo inspect --raw "${tls[@]}" "docker://${ref[$component]%:*}@${digest[$component]}" >"$work/$component.index"
  (cd "$ROOT" && python3 -m hack.build.oci_index --expect "$expect" <"$work/$component.index") \
    >"$work/$component.platforms"
  while read -r a d; do arch_digest[$component/$a]="$d"; done <"$work/$component.platforms"
  for a in "${arches[@]}"; do
    # Its software bill of materials (hack/build/sbom.py, SPDX JSON), pushed beside it as an OCI artifact under
    # the tag sha256-<hex>.sbom (cosign's convention for what belongs to a digest).
    d="${arch_digest[$component/$a]}"
    sbom_file="$work/mpijob-$component-$VERSION-$a.spdx.json"
    (cd "$ROOT" && python3 -m hack.build.sbom --archive "${archive[$component/$a]}" --image "${ref[$component]}" \
      --digest "$d" --arch "$a" --out "$sbom_file")
    sbom[$component/$a]="$REGISTRY/mpijob-$component:${d/:/-}.sbom"
    push_artifact "$sbom_file" application/spdx+json "${sbom[$component/$a]}" "$work/$component-$a.sbom.digest"
    sbom_digest[$component/$a]="$(cat "$work/$component-$a.sbom.digest")"
  done
done

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

# 4. Signatures, with COSIGN_KEY: cosign (build-cosign.sh, from the Go module proxy) signs with that key each index
# and, recursively, each platform's image in it (whichever of the digests an admin or an admission policy checks),
# each SBOM and the chart, the signatures pushed beside them (tags sha256-<hex>.sig); no transparency log upload
# (a private key of the maintainers; verify with `cosign verify --key cosign.pub --insecure-ignore-tlog`).
signed="Not signed (no COSIGN_KEY; RELEASE.md)."
if [[ -n "${COSIGN_KEY:-}" ]]; then
  cosign="$(bash "$HERE/build-cosign.sh" | tail -1)"
  sign_flags=(--yes --key "$COSIGN_KEY" --tlog-upload=false)
  [[ "${INSECURE:-}" == 1 ]] && sign_flags+=(--allow-insecure-registry --allow-http-registry)
  targets=()
  for component in webhook reconciler; do
    log "cosign sign --recursive ${ref[$component]%:*}@${digest[$component]}"
    COSIGN_PASSWORD="${COSIGN_PASSWORD:-}" "$cosign" sign "${sign_flags[@]}" --recursive \
      "${ref[$component]%:*}@${digest[$component]}" >&2
    for a in "${arches[@]}"; do targets+=("${sbom[$component/$a]%:*}@${sbom_digest[$component/$a]}"); done
  done
  for target in "${targets[@]}" "$REGISTRY/charts/mpi-operator@$chart_digest"; do
    log "cosign sign $target"
    COSIGN_PASSWORD="${COSIGN_PASSWORD:-}" "$cosign" sign "${sign_flags[@]}" "$target" >&2
  done
  signed="Signed with $COSIGN_KEY (cosign): both image indexes and each platform's image, the SBOMs, the chart."
fi

architectures=""
for a in "${arches[@]}"; do
  how=$([[ "$a" == "$host" ]] && echo native || echo "emulated, qemu-user-static")
  architectures+="${architectures:+, }linux/$a ($how; images ready in ${took[$a]} s)"
done
[[ -z "$not_built" ]] || architectures+="; $not_built"
plain=""; [[ "${INSECURE:-}" == 1 ]] && plain=" --plain-http"
echo "Released $VERSION (commit $revision):"
for component in webhook reconciler; do
  echo "  ${ref[$component]}  (${digest[$component]}, an image index of $platforms)"
  for a in "${arches[@]}"; do
    echo "    linux/$a  ${arch_digest[$component/$a]}"
    echo "      SBOM (SPDX JSON) ${sbom[$component/$a]}  (${sbom_digest[$component/$a]})"
  done
done
cat <<END
  $chart  ($chart_digest)
$signed
Architectures: $architectures.

Install it (docs/operator-guide.md#install-a-released-version):
  helm install mpi-operator oci://$REGISTRY/charts/mpi-operator --version $VERSION$plain

webhook=${ref[webhook]}@${digest[webhook]}
reconciler=${ref[reconciler]}@${digest[reconciler]}
chart=$chart@$chart_digest
END
for component in webhook reconciler; do
  for a in "${arches[@]}"; do
    echo "$component-$a=${ref[$component]%:*}@${arch_digest[$component/$a]}"
    echo "$component-$a-sbom=${sbom[$component/$a]}@${sbom_digest[$component/$a]}"
  done
done
