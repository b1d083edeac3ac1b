"""A software bill of materials of one image, as SPDX 2.3 JSON, for `make release` (hack/build/release.sh).

    python3 -m hack.build.sbom --archive operator-webhook-<key>.tar --image REGISTRY/mpijob-webhook:1.2.3 \
        --digest sha256:... [--arch arm64] --out mpijob-webhook-1.2.3-arm64.spdx.json

What the image holds, read from its docker-archive's layers (the last layer that has a file wins): every Debian
package of `var/lib/dpkg/status` (installed ones) and every Python distribution of the virtualenv
(`opt/venv/lib/python*/site-packages/*.dist-info/METADATA`, what pip installed from the lock), each with its
version and package URL; the image is the document's described package, CONTAINS each of them.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import tarfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DPKG_STATUS = "var/lib/dpkg/status"
DIST_INFO = re.compile(r"^opt/venv/lib/python[0-9.]+/site-packages/[^/]+\.dist-info/METADATA$")


def layer_files(archive: Path) -> Iterator[tuple[str, bytes]]:
    """(path, content) of the files the SBOM reads, layer by layer from the bottom."""
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(layer)) as inner:
                for member in inner:
                    name = member.name.removeprefix("./")
                    if member.isfile() and (name == DPKG_STATUS or DIST_INFO.match(name)):
                        yield name, inner.extractfile(member).read()  # type: ignore[union-attr]


def debian_packages(status: str) -> list[dict[str, str]]:
    """The installed packages of a dpkg status file: name, version, architecture."""
    found = []
    for stanza in status.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.MULTILINE))
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            found.append({"name": fields["Package"], "version": fields["Version"],
                          "arch": fields.get("Architecture", "all")})
    return found


def spdx_package(spdx_id: str, name: str, version: str, purl: str) -> dict[str, Any]:
    return {"SPDXID": spdx_id, "name": name, "versionInfo": version, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": purl}]}


def build_sbom(files: dict[str, bytes], image: str, digest: str, created: str, namespace: str,
               arch: str = "") -> dict[str, Any]:
    """The SPDX document of IMAGE (name:tag) at DIGEST from its FILES (path -> content, the last layer's); ARCH:
    the image's architecture, when DIGEST is that of one architecture's image of a multi-architecture tag (the
    image's package URL says it, as the purl specification's `arch` qualifier of pkg:oci)."""
    repository, tag = image.rsplit(":", 1)
    qualifiers = f"arch={arch}&" if arch else ""
    root = spdx_package("SPDXRef-Image", repository, tag,
                        f"pkg:oci/{repository.rsplit('/', 1)[-1]}@{digest.replace(':', '%3A')}"
                        f"?{qualifiers}repository_url={repository}")
    packages: list[dict[str, Any]] = []
    for deb in debian_packages(files.get(DPKG_STATUS, b"").decode()):
        packages.append(spdx_package(f"SPDXRef-deb-{len(packages)}", deb["name"], deb["version"],
                                     f"pkg:deb/debian/{deb['name']}@{deb['version']}?arch={deb['arch']}"))
    for path in sorted(p for p in files if DIST_INFO.match(p)):
        meta = email.parser.HeaderParser().parsestr(files[path].decode())
        name, version = meta["Name"], meta["Version"]
        packages.append(spdx_package(f"SPDXRef-pypi-{len(packages)}", name, version,
                                     f"pkg:pypi/{re.sub(r'[-_.]+', '-', name).lower()}@{version}"))
    return {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{image}@{digest}", "documentNamespace": namespace,
        "creationInfo": {"created": created, "creators": ["Tool: mpijob-operator-release"]},
        "packages": [root, *packages],
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                           "relatedSpdxElement": "SPDXRef-Image"},
                          *({"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS",
                             "relatedSpdxElement": p["SPDXID"]} for p in packages)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", type=Path, required=True, help="the image as a docker-archive")
    parser.add_argument("--image", required=True, help="the pushed reference, name:tag")
    parser.add_argument("--digest", required=True, help="the pushed manifest's digest, sha256:...")
    parser.add_argument("--arch", default="", help="the image's architecture (amd64, arm64): DIGEST is that one's")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    files = dict(layer_files(args.archive))  # later layers replace earlier ones' files
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = build_sbom(files, args.image, args.digest, created,
                          f"https://spdx.org/spdxdocs/{args.image.replace(':', '-')}-{uuid.uuid4()}", args.arch)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
