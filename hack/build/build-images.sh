#!/usr/bin/env bash
# Builds the images the real node runs, without a registry or a Docker engine, into a cache directory
# outside the checkout: a root filesystem from Debian packages (mmdebstrap), packed as a docker-archive
# (hack/build/image_archive.py) that `ctr -n k8s.io images import` takes.
#   pause                        the pod sandbox image (registry.k8s.io/pause:3.10), from hack/build/images/pause
#   mpioperator/mpi-pi:openmpi   Open MPI 5.0.7 from Debian trixie, as upstream's example image since v0.7.0
#   mpioperator/mpi-pi:openmpi4  Open MPI 4.1.4 from Debian bookworm (upstream's image before v0.7.0)
#   mpioperator/mpi-pi:mpich     MPICH 4.2.1 from Debian trixie, as upstream's example image
#   mpioperator/mpi-pi:intel     Intel MPI from the PyPI wheels impi-rt and impi-devel, on bookworm
# Each pi image has upstream's conventions (user mpiuser, uid 1000; sshd on port 2222 with
# ~/.sshd_config; /home/mpiuser/pi) plus /home/mpiuser/netcheck, built from examples/netcheck/netcheck.c.
#   mpioperator/mpi-pytorch:openmpi  Open MPI 5 and PyTorch (CPU) from Debian trixie, Horovod and DeepSpeed built
#                                from PyPI against them, the scripts of examples/training in /home/mpiuser;
#                                the pi images' conventions; 1.2 GB, most of it PyTorch. Not in the default set:
#                                ~15 min cold (886 s measured, 5 min of it CPU: compiling Horovod); make's
#                                debian-images builds it last, beside the Go chain, and tests/e2e/test_examples_ml.py
#                                on first use when it is missing
#   mpijob-operator/python-base  Debian's Python 3.11: the local base of Dockerfile.webhook/.reconciler; `python:ARCH`
#                                builds it for Debian architecture ARCH (arm64, amd64) under emulation when that is not
#                                the host's (tagged 3.11-bookworm-ARCH; hack/build/ensure-binfmt.sh, make release)
#   mpijob-operator/prometheus:trixie  Debian trixie's prometheus package (2.53), for tests/e2e/test_monitoring.py
#                                (bookworm's 2.42 is built without Kubernetes service discovery)
# Usage: build-images.sh [pause|openmpi|openmpi4|mpich|intel|prometheus|python|python:ARCH ...] (default: all but python).
# Each archive is keyed by the hash of its inputs; a second run with the archives present does no work. Each image
# logs its build time ("prometheus ready (20 s)"). Prints the image directory.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/images"
NETCHECK="$HERE/../../examples/netcheck/netcheck.c"
OUT="${IMAGES_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/mpijob-operator/images}"
SUITE="${DEBIAN_SUITE:-bookworm}"  # the suite of the images that do not name their own
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
IMPI_VERSION="${IMPI_VERSION:-2021.13.1}"  # the version upstream's image has; it bundles libfabric
PAUSE_TAG="registry.k8s.io/pause:3.10"

log() { printf '[build-images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
need_mmdebstrap() {  # installed when missing and we are root, as build-node.sh installs containerd
  command -v mmdebstrap >/dev/null || bash "$HERE/apt-install.sh" mmdebstrap
}
inputs_hash() {  # the files an image is made of plus the text of its recipe ("$@"), not this whole script;
  # the checkout's own path is left out, so a clone in another folder finds the same archives
  { cat "$HERE/image_archive.py" "$SRC"/pi.c "$NETCHECK" "$SRC"/entrypoint.sh "$SRC"/sshd_config
    printf '%s\n' "$@" | sed "s#$HERE#.#g"; } | sha256sum | cut -c1-12; }
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
flock -n 9 || { log "another build is running; waiting for it ..."; flock 9; }

pack() {  # pack LAYER OUT TAG [image_archive args...]; ARCHIVE_MODULE: another module taking them (platform_archive)
  local layer=$1 out=$2 tag=$3; shift 3
  (cd "$HERE/../.." && python3 -m "${ARCHIVE_MODULE:-hack.build.image_archive}" --layer "$layer" --out "$out" \
    --tag "$tag" "$@") >/dev/null
  rm -f "$layer"
  log "$tag: $(du -m "$out" | cut -f1) MB"
}

build_pause() {
  local out="$OUT/pause-$(inputs_hash "$(cat "$SRC/pause/main.go")" "$PAUSE_TAG").tar"
  [[ -f "$out" ]] && return 0
  local work; work="$(mktemp -d)"
  mkdir -p "$work/root"
  # shellcheck source=hack/build/goenv.sh
  (cd "$SRC/pause" && source "$HERE/goenv.sh" && \
    go build -trimpath -ldflags "-s -w" -o "$work/root/pause" .)
  tar -C "$work/root" --owner=0 --group=0 -cf "$work/layer.tar" pause
  rm -f "$OUT/pause-"*.tar
  pack "$work/layer.tar" "$out" "$PAUSE_TAG" --entrypoint /pause --user 65535:65535
  rm -rf "$work"
}

# The common part of the pi images, as upstream's build/base/Dockerfile: sshd and ssh on port 2222 with
# host-key checks off, StrictModes no, user mpiuser (uid 1000) with its own sshd config, /entrypoint.sh.
BASE_HOOKS=(
  --customize-hook='mkdir -p "$1/run/sshd" "$1/var/run/sshd"'
  --customize-hook='sed -i "s/[ #]\(.*StrictHostKeyChecking \).*/ \1no/g; s/[ #]\(.*Port \).*/ \12222/g" "$1/etc/ssh/ssh_config"'
  --customize-hook='echo "    UserKnownHostsFile /dev/null" >> "$1/etc/ssh/ssh_config"'
  --customize-hook='sed -i "s/#\(StrictModes \).*/\1no/g; s/#\(Port \).*/\12222/g" "$1/etc/ssh/sshd_config"'
  --customize-hook='chroot "$1" useradd -m -u 1000 -s /bin/bash mpiuser'
  --customize-hook="upload $SRC/sshd_config /home/mpiuser/.sshd_config"
  --customize-hook="upload $SRC/entrypoint.sh /entrypoint.sh"
  --customize-hook="upload $SRC/pi.c /tmp/pi.c"
  --customize-hook="upload $NETCHECK /tmp/netcheck.c"
  --customize-hook='chmod 0755 "$1/entrypoint.sh"'
)
FINAL_HOOKS=(
  --customize-hook='chroot "$1" chown -R mpiuser:mpiuser /home/mpiuser'
  --customize-hook='rm -rf "$1/tmp/pi.c" "$1/tmp/netcheck.c" "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"'
)
BASE_PKGS="openssh-server,openssh-client,ca-certificates,procps,iproute2,dnsutils"

debian_image() {  # debian_image NAME SUITE PACKAGES DEV_PACKAGES COMPILE [EXTRA_HOOK...]
  local name=$1 suite=$2 pkgs=$3 dev=$4 compile=$5; shift 5
  local hooks=() envs=()
  while (( $# )); do
    if [[ $1 == --env ]]; then envs+=(--env "$2"); shift 2; else hooks+=("$1"); shift; fi
  done
  local tag="mpioperator/mpi-pi:$name"
  local out="$OUT/mpi-pi-$name-$(inputs_hash "$BASE_PKGS $pkgs $dev $compile $suite" "${BASE_HOOKS[@]}" \
    "${FINAL_HOOKS[@]}" "${hooks[@]}" "${envs[@]}").tar"
  [[ -f "$out" ]] && return 0
  [[ -z "${PREPARE:-}" ]] || "$PREPARE"
  need_mmdebstrap
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap $suite with $pkgs"
  mmdebstrap --quiet --variant=apt --format=tar --include="$BASE_PKGS${pkgs:+,$pkgs},$dev" "${BASE_HOOKS[@]}" "${hooks[@]}" \
    --customize-hook="chroot \"\$1\" sh -c '$compile -O2 -o /home/mpiuser/pi /tmp/pi.c'" \
    --customize-hook="chroot \"\$1\" sh -c '$compile -O2 -o /home/mpiuser/netcheck /tmp/netcheck.c'" \
    --customize-hook="chroot \"\$1\" apt-get purge -y -q --autoremove ${dev//,/ } >/dev/null" \
    "${FINAL_HOOKS[@]}" "$suite" "$work/layer.tar" "$MIRROR" >&2
  # mmdebstrap empties /run at the end; root's sshd needs its privilege separation directory there
  mkdir -p "$work/extra/run/sshd"
  tar -C "$work/extra" --owner=0 --group=0 --mode=0755 -rf "$work/layer.tar" ./run/sshd
  rm -f "$OUT/mpi-pi-$name-"????????????.tar  # earlier recipes' archives (not openmpi4-* for openmpi)
  pack "$work/layer.tar" "$out" "$tag" --entrypoint /entrypoint.sh --workdir /home/mpiuser \
    --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${envs[@]}"
  rm -rf "$work"
}

# Open MPI 5 (PRRTE in place of ORTE) and MPICH 4.2 from trixie, as upstream's examples/v2beta1/pi images;
# Open MPI 4 (ORTE) from bookworm, so both generations of Open MPI's launcher stay tested.
build_openmpi() { debian_image openmpi trixie openmpi-bin libopenmpi-dev,gcc,libc6-dev mpicc; }
build_openmpi4() { debian_image openmpi4 bookworm openmpi-bin libopenmpi-dev,gcc,libc6-dev mpicc; }
build_mpich() { debian_image mpich trixie mpich libmpich-dev,gcc,libc6-dev mpicc; }
IMPI_PREFIX="$OUT/.impi-$IMPI_VERSION"  # a fixed path: it is part of the intel recipe's text
impi_wheels() {  # the wheels (impi-rt with its bundled libfabric, impi-devel), installed by pip on the host
  rm -rf "$IMPI_PREFIX"
  python3 -m pip install --quiet --disable-pip-version-check --no-compile --ignore-installed \
    --no-warn-script-location --prefix "$IMPI_PREFIX" "impi-devel==$IMPI_VERSION" "impi-rt==$IMPI_VERSION" >&2
  rm -rf "$IMPI_PREFIX/lib/python3"*
}
build_intel() {  # the prefix is copied to /usr/local: bin/mpirun (Hydra), lib/libmpi.so, include/mpi.h
  PREPARE=impi_wheels debian_image intel "$SUITE" "" gcc,libc6-dev "ldconfig; mpicc" \
    --customize-hook="sync-in $IMPI_PREFIX /usr/local" \
    --customize-hook='printf "/usr/local/lib\n/usr/local/lib/libfabric\n" > "$1/etc/ld.so.conf.d/impi.conf"' \
    --env FI_PROVIDER_PATH=/usr/local/lib/libfabric/prov --env I_MPI_ROOT=/usr/local
  rm -rf "$IMPI_PREFIX"
}

# PyTorch training over MPI, for examples/horovod-pytorch.yaml and examples/deepspeed.yaml (the mpirun form):
# Debian trixie's Open MPI 5 (as the openmpi image), python3-torch (2.6, CPU) and python3-mpi4py, and from PyPI the
# source distributions of Horovod and DeepSpeed, fetched on the host (which holds the CA that reaches PyPI) with
# their hashes checked, and built inside the image against those by images/pytorch-wheels.sh. The build toolchain
# is purged afterwards, as the pi images' compiler is. One image for both: PyTorch is most of its size.
HOROVOD_VERSION=0.28.1 HOROVOD_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
DEEPSPEED_VERSION=0.19.8 DEEPSPEED_SHA256=9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af
TRAINING="$HERE/../../examples/training"
PYTORCH_SRC="$OUT/.pytorch-src"  # a fixed path: it is part of the recipe's text
PYTORCH_PKGS=python3-torch,python3-mpi4py,openmpi-bin,python3-cloudpickle,python3-psutil,python3-yaml,python3-packaging,python3-einops,python3-hjson,python3-msgpack,python3-cpuinfo,python3-pydantic,python3-tqdm
PYTORCH_DEV=g++,make,cmake,binutils,python3-dev,python3-pip,python3-setuptools,python3-cffi,libtorch-dev,pybind11-dev,libopenmpi-dev
PYTORCH_HOOKS=(
  --customize-hook='mkdir -p "$1/tmp/build"' --customize-hook="sync-in $PYTORCH_SRC /tmp/build"
  --customize-hook="upload $TRAINING/horovod_pytorch.py /home/mpiuser/horovod_pytorch.py"
  --customize-hook="upload $TRAINING/deepspeed_zero.py /home/mpiuser/deepspeed_zero.py"
  --customize-hook='chroot "$1" sh /tmp/build/pytorch-wheels.sh'
  --customize-hook="chroot \"\$1\" apt-get purge -y -q --autoremove ${PYTORCH_DEV//,/ } >/dev/null"
  --customize-hook='rm -rf "$1/tmp/build" "$1/root/.cache"'
)
pytorch_sources() {  # the two source distributions, checked against the hashes above, and the build script
  rm -rf "$PYTORCH_SRC" && mkdir -p "$PYTORCH_SRC"
  printf 'horovod==%s --hash=sha256:%s\ndeepspeed==%s --hash=sha256:%s\n' "$HOROVOD_VERSION" "$HOROVOD_SHA256" \
    "$DEEPSPEED_VERSION" "$DEEPSPEED_SHA256" > "$PYTORCH_SRC/requirements.txt"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: --require-hashes \
    -d "$PYTORCH_SRC" -r "$PYTORCH_SRC/requirements.txt" >&2
  cp "$SRC/pytorch-wheels.sh" "$PYTORCH_SRC/"
}
build_pytorch() {
  local tag="mpioperator/mpi-pytorch:openmpi"
  local out="$OUT/mpi-pytorch-openmpi-$(inputs_hash "$BASE_PKGS $PYTORCH_PKGS $PYTORCH_DEV trixie" "${BASE_HOOKS[@]}" \
    "${PYTORCH_HOOKS[@]}" "${FINAL_HOOKS[@]}" "$HOROVOD_VERSION $HOROVOD_SHA256 $DEEPSPEED_VERSION $DEEPSPEED_SHA256" \
    "$(cat "$SRC/pytorch-wheels.sh" "$TRAINING/horovod_pytorch.py" "$TRAINING/deepspeed_zero.py")").tar"
  [[ -f "$out" ]] && return 0
  need_mmdebstrap
  pytorch_sources
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap trixie with $PYTORCH_PKGS; Horovod $HOROVOD_VERSION and DeepSpeed $DEEPSPEED_VERSION"
  mmdebstrap --quiet --variant=apt --format=tar --include="$BASE_PKGS,$PYTORCH_PKGS,$PYTORCH_DEV" "${BASE_HOOKS[@]}" \
    "${PYTORCH_HOOKS[@]}" "${FINAL_HOOKS[@]}" trixie "$work/layer.tar" "$MIRROR" >&2
  mkdir -p "$work/extra/run/sshd"  # as debian_image: root's sshd needs it, and mmdebstrap empties /run
  tar -C "$work/extra" --owner=0 --group=0 --mode=0755 -rf "$work/layer.tar" ./run/sshd
  rm -f "$OUT/mpi-pytorch-openmpi-"????????????.tar
  pack "$work/layer.tar" "$out" "$tag" --entrypoint /entrypoint.sh --workdir /home/mpiuser \
    --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  rm -rf "$work" "$PYTORCH_SRC"
}

# The base of our operator images (Dockerfile.webhook/Dockerfile.reconciler, BASE_IMAGE build argument):
# Debian's Python 3.11 with venv, in place of the public python:3.11-slim that needs a registry. build_python ARCH
# (python:ARCH) builds it for another Debian architecture than the host's: mmdebstrap --architectures=ARCH runs the
# packages' scripts under emulation (ensure-binfmt.sh), the archive's config says ARCH (platform_archive.py), and
# it is cached beside the host's (python-base-ARCH-<hash>.tar, tag 3.11-bookworm-ARCH). The host's recipe, archive
# name and hash are as they were without the parameter.
build_python() {
  local host arch; host="$(dpkg --print-architecture)"; arch="${1:-$host}"
  local tag="mpijob-operator/python-base:3.11-bookworm" name=python-base recipe=() foreign=() packer=()
  local module=hack.build.image_archive emulated=""
  if [[ "$arch" != "$host" ]]; then
    tag+="-$arch"; name+="-$arch"; foreign=(--architectures="$arch"); emulated=" for $arch (emulated)"
    recipe=("$arch" "$(cat "$HERE/platform_archive.py")"); module=hack.build.platform_archive
    packer=(--architecture "$arch")
  fi
  local out="$OUT/$name-$(inputs_hash "python3,python3-venv,python-is-python3,ca-certificates $SUITE" "${recipe[@]}").tar"
  [[ -f "$out" ]] && return 0
  need_mmdebstrap
  [[ -z "$emulated" ]] || bash "$HERE/ensure-binfmt.sh" "$arch"
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap $SUITE with python3$emulated"
  mmdebstrap --quiet --variant=apt --format=tar "${foreign[@]}" \
    --include=python3,python3-venv,python-is-python3,ca-certificates \
    --customize-hook='rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"' \
    "$SUITE" "$work/layer.tar" "$MIRROR" >&2
  rm -f "$OUT/$name-"????????????.tar
  ARCHIVE_MODULE=$module pack "$work/layer.tar" "$out" "$tag" "${packer[@]}" --cmd python3 \
    --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  rm -rf "$work"
}

# Prometheus as users run it, from a distribution package: Debian trixie's `prometheus` (2.53), which apt resolves
# from trixie's Packages index and checks against its SHA256 there (the index itself signed by the Release file).
# Bookworm's 2.42 cannot be used: Debian builds it without Kubernetes service discovery ("field
# kubernetes_sd_configs not found"), which deploy/monitoring/prometheus-scrape.yaml needs. The image runs
# /usr/bin/prometheus as nobody; the Pod gives it its configuration and an emptyDir for the TSDB.
PROMETHEUS_SUITE=trixie
PROMETHEUS_HOOKS=(
  --customize-hook='mkdir -p "$1/prometheus" && chown 65534:65534 "$1/prometheus"'
  --customize-hook='rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"'
)
PROMETHEUS_CONFIG=(--entrypoint /usr/bin/prometheus --user 65534:65534 --workdir /prometheus
  --cmd=--config.file=/etc/prometheus/prometheus.yml --cmd=--storage.tsdb.path=/prometheus
  --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
build_prometheus() {
  local tag="mpijob-operator/prometheus:$PROMETHEUS_SUITE"
  local out="$OUT/prometheus-$(inputs_hash "prometheus,ca-certificates $PROMETHEUS_SUITE" "${PROMETHEUS_HOOKS[@]}" \
    "${PROMETHEUS_CONFIG[@]}").tar"
  [[ -f "$out" ]] && return 0
  need_mmdebstrap
  local work; work="$(mktemp -d)"
  log "$tag: mmdebstrap $PROMETHEUS_SUITE with prometheus"
  mmdebstrap --quiet --variant=apt --format=tar --include=prometheus,ca-certificates \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f '\${Version}' prometheus > $work/version" \
    "${PROMETHEUS_HOOKS[@]}" "$PROMETHEUS_SUITE" "$work/layer.tar" "$MIRROR" >&2
  log "$tag: Debian's prometheus $(cat "$work/version")"
  rm -f "$OUT/prometheus-"????????????.tar
  pack "$work/layer.tar" "$out" "$tag" "${PROMETHEUS_CONFIG[@]}"
  rm -rf "$work"
}

targets=("$@"); (( ${#targets[@]} )) || targets=(pause openmpi openmpi4 mpich intel prometheus)
for t in "${targets[@]}"; do
  began=$SECONDS
  if [[ "$t" == python:* ]]; then build_python "${t#python:}"; else "build_$t"; fi
  log "$t ready ($((SECONDS - began)) s)"
done
echo "$OUT"
