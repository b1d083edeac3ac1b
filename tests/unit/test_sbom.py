"""hack/build/sbom.py, the SBOM `make release` pushes beside each image: the SPDX document of a small image's files
(a dpkg status with an installed and a removed package, two Python distributions), compared whole; and the files
read from a docker-archive, the upper layer's winning. tests/e2e/test_release.py checks the pushed ones."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from hack.build import sbom

STATUS = b"""Package: zlib1g
Status: install ok installed
Architecture: amd64
Version: 1:1.2.13.dfsg-1

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2024a-0+deb12u1
"""
SITE = "opt/venv/lib/python3.11/site-packages"
FILES = {
    sbom.DPKG_STATUS: STATUS,
    f"{SITE}/typing_extensions-4.16.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: typing_extensions\n"
                                                          b"Version: 4.16.0\n\nbody\n",
    f"{SITE}/mpijob_operator-0.1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: mpijob-operator\n"
                                                       b"Version: 0.1.0\n",
}


def package(spdx_id: str, name: str, version: str, purl: str) -> dict[str, Any]:
    return {"SPDXID": spdx_id, "name": name, "versionInfo": version, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "externalRefs": [
                {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}]}


def test_the_sbom_of_an_image_lists_its_debian_and_python_packages() -> None:
    digest = "sha256:" + "ab" * 32
    document = sbom.build_sbom(FILES, "r.example.com/mpi/mpijob-webhook:1.2.3", digest, "2026-12-06T00:00:00Z",
                               "https://spdx.org/spdxdocs/x")
    ids = ["SPDXRef-deb-0", "SPDXRef-deb-1", "SPDXRef-pypi-2", "SPDXRef-pypi-3"]
    assert document == {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"r.example.com/mpi/mpijob-webhook:1.2.3@{digest}", "documentNamespace": "https://spdx.org/spdxdocs/x",
        "creationInfo": {"created": "2026-12-06T00:00:00Z", "creators": ["Tool: mpijob-operator-release"]},
        "packages": [
            package("SPDXRef-Image", "r.example.com/mpi/mpijob-webhook", "1.2.3",
                    f"pkg:oci/mpijob-webhook@sha256%3A{'ab' * 32}?repository_url=r.example.com/mpi/mpijob-webhook"),
            package(ids[0], "zlib1g", "1:1.2.13.dfsg-1", "pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1?arch=amd64"),
            package(ids[1], "tzdata", "2024a-0+deb12u1", "pkg:deb/debian/tzdata@2024a-0+deb12u1?arch=all"),
            package(ids[2], "mpijob-operator", "0.1.0", "pkg:pypi/mpijob-operator@0.1.0"),
            package(ids[3], "typing_extensions", "4.16.0", "pkg:pypi/typing-extensions@4.16.0"),
        ],
        "relationships": [
            {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
             "relatedSpdxElement": "SPDXRef-Image"},
            *({"spdxElementId": "SPDXRef-Image", "relationshipType": "CONTAINS", "relatedSpdxElement": i} for i in ids),
        ],
    }


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return out.getvalue()


def test_files_are_read_from_the_layers_the_upper_one_winning(tmp_path: Path) -> None:
    metadata = f"{SITE}/x-1.dist-info/METADATA"
    lower = _tar({sbom.DPKG_STATUS: b"old", "etc/hostname": b"x", metadata: b"Name: x\nVersion: 1\n"})
    upper = _tar({f"./{sbom.DPKG_STATUS}": b"new"})
    archive = tmp_path / "image.tar"
    archive.write_bytes(_tar({"manifest.json": json.dumps([{"Layers": ["l1.tar", "l2.tar"]}]).encode(),
                              "l1.tar": lower, "l2.tar": upper}))
    assert dict(sbom.layer_files(archive)) == {sbom.DPKG_STATUS: b"new", metadata: b"Name: x\nVersion: 1\n"}


def test_the_sbom_of_one_platforms_image_names_its_architecture_in_the_image_purl() -> None:
    digest = "sha256:" + "cd" * 32
    document = sbom.build_sbom({}, "r.example.com/mpijob-webhook:1.2.3", digest, "2026-12-06T00:00:00Z",
                               "https://spdx.org/spdxdocs/x", "arm64")
    assert document["packages"] == [
        package("SPDXRef-Image", "r.example.com/mpijob-webhook", "1.2.3",
                f"pkg:oci/mpijob-webhook@sha256%3A{'cd' * 32}?arch=arm64&repository_url=r.example.com/mpijob-webhook")]
    assert document["name"] == f"r.example.com/mpijob-webhook:1.2.3@{digest}"
