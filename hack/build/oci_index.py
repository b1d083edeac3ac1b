"""The per-architecture images of a pushed image index, for `make release` (hack/build/release.sh).

    skopeo inspect --raw docker://REGISTRY/mpijob-webhook@sha256:... \
        | python3 -m hack.build.oci_index --expect amd64,arm64

reads an image index (OCI, or Docker's manifest list) on stdin and prints one line ``<architecture> <digest>`` for
each architecture of --expect, in that order: the digest of the image manifest the index lists for linux/that
architecture. It fails (status 1, the reason on stderr) unless the index lists exactly those architectures, each
once, all linux: what the release pushed is what it meant to push.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


class UnexpectedIndexError(ValueError):
    """The index is not what the release meant to push."""


def platform_digests(index: dict[str, Any]) -> dict[str, str]:
    """Architecture -> image manifest digest of each entry of INDEX, every one linux and of its own architecture."""
    if index.get("mediaType") not in INDEX_TYPES or not isinstance(index.get("manifests"), list):
        raise UnexpectedIndexError(f"not an image index (mediaType {index.get('mediaType')!r})")
    digests: dict[str, str] = {}
    for entry in index["manifests"]:
        platform = entry.get("platform") or {}
        if platform.get("os") != "linux" or not platform.get("architecture"):
            raise UnexpectedIndexError(f"{entry.get('digest')}: platform {platform} is not linux/<architecture>")
        if platform["architecture"] in digests:
            raise UnexpectedIndexError(f"two images for linux/{platform['architecture']}")
        digests[platform["architecture"]] = entry["digest"]
    return digests


def expected_digests(index: dict[str, Any], architectures: list[str]) -> list[tuple[str, str]]:
    """(architecture, digest) for each of ARCHITECTURES, in their order; UnexpectedIndexError unless the index
    lists exactly those."""
    digests = platform_digests(index)
    if sorted(digests) != sorted(architectures):
        raise UnexpectedIndexError(f"the index lists linux/{', linux/'.join(sorted(digests))}, "
                          f"not linux/{', linux/'.join(sorted(architectures))}")
    return [(architecture, digests[architecture]) for architecture in architectures]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--expect", required=True, help="the architectures, comma-separated: amd64,arm64")
    args = parser.parse_args(argv)
    try:
        pairs = expected_digests(json.load(sys.stdin), args.expect.split(","))
    except (UnexpectedIndexError, ValueError, KeyError) as exc:
        print(f"oci_index: {exc}", file=sys.stderr)
        return 1
    for architecture, digest in pairs:
        print(architecture, digest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
