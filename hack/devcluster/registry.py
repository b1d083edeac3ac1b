"""A real container registry on this machine: Debian's docker-registry (the CNCF distribution registry, v2.8)
as a host process serving plain HTTP on 127.0.0.1, its storage in a directory of its own.

    with LocalRegistry(tmp_dir) as registry:
        subprocess.run(["make", "images", f"REGISTRY={registry.host}/mpijob", "INSECURE=1"])
        registry.tags("mpijob/mpijob-webhook")          # what was pushed
        registry.manifest_pulls("mpijob/mpijob-webhook")  # who fetched its manifests (the access log)

hack/build/install-registry.sh installs it (and skopeo) when missing; `stop()` stops the process and leaves
nothing running. The real node's containerd is told about it by RealNodeCluster.registry_configured.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import TracebackType

from . import processes
from .binaries import REPO_ROOT
from .wait import HarnessError, wait_for

INSTALL_SCRIPT = REPO_ROOT / "hack" / "build" / "install-registry.sh"
ADDRESS = "127.0.0.1"  # where every LocalRegistry listens, each on a port of its own
CONFIG = """\
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: {address}:{port}
"""
# the combined log format of the registry's access log: "GET /v2/<name>/manifests/<ref> HTTP/1.1" <status> ... "<agent>"
ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>/v2/\S+) HTTP/[0-9.]+" (?P<status>\d{3}) .* "(?P<agent>[^"]*)"\s*$')


def registry_binary() -> Path:
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{INSTALL_SCRIPT.name} failed with status {proc.returncode} (see its output above)")
    return Path(lines[-1])


class LocalRegistry:
    """docker-registry on 127.0.0.1:<free port>, storage and log under `directory`."""

    def __init__(self, directory: Path, start_timeout: float = 30) -> None:
        self.directory = directory
        self.start_timeout = start_timeout
        self.port = 0
        self.process: processes.Process | None = None

    @property
    def host(self) -> str:
        """host:port, as image references and containerd's hosts.toml name it."""
        return f"{ADDRESS}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "registry.log"

    def start(self) -> LocalRegistry:
        binary = registry_binary()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = processes.free_port()
        config = self.directory / "config.yml"
        config.write_text(CONFIG.format(storage=self.directory / "storage", address=ADDRESS, port=self.port))
        self.process = processes.start("docker-registry", [str(binary), "serve", str(config)], self.log,
                                       cwd=self.directory)
        proc = self.process

        def serving() -> bool:
            proc.check_running()
            try:
                return processes.http_get(f"http://{self.host}/v2/", timeout=1.0)[0] == 200
            except OSError:
                return False

        wait_for(serving, self.start_timeout, 0.1, what=f"docker-registry serving on {self.host}")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def tags(self, repository: str) -> list[str]:
        status, body = processes.http_get(f"http://{self.host}/v2/{repository}/tags/list")
        if status != 200:
            raise HarnessError(f"GET /v2/{repository}/tags/list: {status} {body}")
        return list(json.loads(body).get("tags") or [])

    def manifest_pulls(self, repository: str) -> list[tuple[str, str, str]]:
        """(method, reference, user agent) of every successful manifest request for `repository` so far."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            match = ACCESS.search(line)
            prefix = f"/v2/{repository}/manifests/"
            if match and match["path"].startswith(prefix) and match["status"] == "200":
                found.append((match["method"], match["path"].removeprefix(prefix), match["agent"]))
        return found
