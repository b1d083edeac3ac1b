"""Pack a root filesystem tar into a docker-archive image that `ctr images import` takes (no registry).

    python3 -m hack.build.image_archive --layer rootfs.tar --tag mpioperator/mpi-pi:openmpi \
        --entrypoint /entrypoint.sh --workdir /home/mpiuser --env PATH=... --out image.tar

The archive holds `manifest.json` (RepoTags, Config, Layers), the config JSON (whose `rootfs.diff_ids`
is the sha256 of the uncompressed layer) and the layer tar itself, as `docker save` writes them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def image_config(diff_id: str, *, entrypoint: list[str], cmd: list[str], env: list[str], workdir: str,
                 user: str) -> dict[str, Any]:
    config: dict[str, Any] = {"Env": env or [f"PATH={DEFAULT_PATH}"]}
    if entrypoint:
        config["Entrypoint"] = entrypoint
    if cmd:
        config["Cmd"] = cmd
    if workdir:
        config["WorkingDir"] = workdir
    if user:
        config["User"] = user
    return {"architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z", "config": config,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/build/image_archive.py"}]}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def write_archive(layer: Path, out: Path, tags: list[str], config: dict[str, Any]) -> str:
    """Write the docker-archive; returns the config digest (the image ID)."""
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_id = hashlib.sha256(config_bytes).hexdigest()
    layer_name = f"{config['rootfs']['diff_ids'][0].removeprefix('sha256:')}/layer.tar"
    manifest = [{"Config": f"{config_id}.json", "RepoTags": tags, "Layers": [layer_name]}]
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as archive:
        _add_bytes(archive, f"{config_id}.json", config_bytes)
        archive.add(layer, arcname=layer_name)
        _add_bytes(archive, "manifest.json", json.dumps(manifest).encode())
    tmp.replace(out)
    return config_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", type=Path, required=True, help="the root filesystem, as an uncompressed tar")
    parser.add_argument("--tag", action="append", required=True, help="repo:tag, repeatable")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--workdir", default="")
    parser.add_argument("--user", default="")
    args = parser.parse_args(argv)
    config = image_config(sha256_file(args.layer), entrypoint=args.entrypoint, cmd=args.cmd, env=args.env,
                          workdir=args.workdir, user=args.user)
    print(write_archive(args.layer, args.out, args.tag, config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
