"""hack/build/image_archive.py for an image of another architecture than amd64 (the one that module writes in every
config, and which the cached archives of the host's images are keyed by, so it stays as it is).

    python3 -m hack.build.platform_archive --architecture arm64 --layer rootfs.tar --tag NAME:TAG --cmd python3 \
        --out image.tar

Takes image_archive's arguments plus ``--architecture`` (a Debian and OCI architecture name: amd64, arm64); the
config says that architecture, with the variant the OCI image index specification names for arm64 (``v8``), so that
`buildah bud --platform linux/arm64` takes the image as a base of that platform.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hack.build import image_archive

VARIANTS = {"arm64": "v8"}  # the OCI image index specification's variant of each architecture that has one


def platform_config(config: dict[str, Any], architecture: str) -> dict[str, Any]:
    """CONFIG (image_archive.image_config's) for ARCHITECTURE: its architecture, and variant where it has one."""
    platform: dict[str, Any] = {"architecture": architecture}
    if architecture in VARIANTS:
        platform["variant"] = VARIANTS[architecture]
    return {**{k: v for k, v in config.items() if k not in ("architecture", "variant")}, **platform}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--architecture", required=True, choices=["amd64", "arm64"])
    parser.add_argument("--layer", type=Path, required=True, help="the root filesystem, as an uncompressed tar")
    parser.add_argument("--tag", action="append", required=True, help="repo:tag, repeatable")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--workdir", default="")
    parser.add_argument("--user", default="")
    args = parser.parse_args(argv)
    config = image_archive.image_config(image_archive.sha256_file(args.layer), entrypoint=args.entrypoint,
                                        cmd=args.cmd, env=args.env, workdir=args.workdir, user=args.user)
    print(image_archive.write_archive(args.layer, args.out, args.tag, platform_config(config, args.architecture)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
