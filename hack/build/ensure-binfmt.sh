#!/usr/bin/env bash
# ensure-binfmt.sh ARCH: makes sure this machine runs Debian architecture ARCH's binaries (amd64 or arm64), natively
# or under emulation: for another architecture than the host's, Debian's qemu-user-static (installed when missing,
# with arch-test) and its binfmt_misc handler qemu-<cpu>, registered here when it is not (binfmt_misc mounted, the
# line of the package's /usr/lib/binfmt.d/qemu-<cpu>.conf written to its register file, as systemd-binfmt does at
# boot; a registration does not survive a reboot and machines without systemd never make it). The handler has the F
# flag (the interpreter opened at registration), so it works inside chroots: mmdebstrap's and buildah's.
# Exit 0 once `arch-test ARCH` says "ARCH: ok"; 2 with the reason on stderr when it cannot be (not root, no apt-get,
# the kernel refuses the registration), which hack/build/release.sh prints.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
arch="${1:?usage: ensure-binfmt.sh amd64|arm64}"
fail() { echo "cannot run $arch binaries: $*" >&2; exit 2; }
host="$(dpkg --print-architecture)"
[[ "$arch" == "$host" ]] && exit 0
case "$arch" in
  amd64) cpu=x86_64 ;;
  arm64) cpu=aarch64 ;;
  *) fail "only amd64 and arm64 are known here" ;;
esac
entry="/proc/sys/fs/binfmt_misc/qemu-$cpu"
if [[ ! -r "$entry" ]] || ! grep -qx enabled "$entry"; then
  [[ $(id -u) -eq 0 ]] || fail "the binfmt_misc handler qemu-$cpu is not registered and only root can register it"
  bash "$HERE/apt-install.sh" qemu-user-static arch-test || fail "qemu-user-static could not be installed"
  conf="/usr/lib/binfmt.d/qemu-$cpu.conf"
  [[ -r "$conf" ]] || fail "qemu-user-static has no $conf"
  if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || fail "binfmt_misc cannot be mounted"
  fi
  if [[ -e "$entry" ]]; then
    echo 1 >"$entry" 2>/dev/null || fail "the handler qemu-$cpu cannot be enabled"
  else
    grep -v '^[#;]' "$conf" | grep . >/proc/sys/fs/binfmt_misc/register 2>/dev/null || \
      fail "the kernel refused the handler of $conf (binfmt_misc register)"
  fi
  echo "registered the binfmt_misc handler qemu-$cpu (qemu-user-static) for $arch binaries" >&2
fi
command -v arch-test >/dev/null || bash "$HERE/apt-install.sh" arch-test >&2 || fail "arch-test could not be installed"
[[ "$(arch-test "$arch" 2>/dev/null)" == "$arch: ok" ]] || fail "arch-test $arch: $(arch-test "$arch" 2>&1 || true)"
