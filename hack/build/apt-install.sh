#!/usr/bin/env bash
# apt-install.sh PACKAGE...: installs those of the Debian packages that are missing (root and apt-get needed),
# one apt-get at a time: `make test` runs its Go and Debian builds side by side (Makefile, builds), and apt-get
# refuses to start while another holds dpkg's lock, so every build script of ours installs through this one lock.
# An install that fails on a stale package list updates the list and tries once more. Progress goes to stderr.
set -euo pipefail
missing=()
for package in "$@"; do
  dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
(( ${#missing[@]} )) || exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "error: missing Debian packages: ${missing[*]} (apt-get install ${missing[*]}, as root)" >&2; exit 2
fi
exec 9>"${TMPDIR:-/tmp}/mpijob-operator-apt.lock"
flock 9
echo "installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >&2 || { apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2; }
