"""No private key, token or Secret data in the webhook's log: the scanner (tests/secret_scan.py) itself,
then a real ``python -m webhook`` process fed admissions full of secrets, bad requests echoing them and a
bad key during reload, with its whole log scanned afterwards."""

from __future__ import annotations

import base64
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from tests.secret_scan import Finding, assert_clean, scan_events, scan_files, scan_text
from tests.webhook.conftest import review
from webhook import certs
from webhook.app import MUTATE_PATH, VALIDATE_PATH

REPO_ROOT = Path(__file__).resolve().parents[2]
RSA_PEM = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()).decode()
SSH_PEM = ed25519.Ed25519PrivateKey.generate().private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()
JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0.c2lnbmF0dXJlLWJ5dGVz"
SECRET_VALUE = "hunter2-database-password"


def kinds(findings: list[Finding]) -> set[str]:
    return {f.kind for f in findings}


@pytest.mark.parametrize(("text", "kind"), [
    (f"msg=x key={orjson.dumps(RSA_PEM).decode()}", "PEM private key"),
    (SSH_PEM, "PEM private key"),
    (SSH_PEM.splitlines()[1], "OpenSSH private key body"),
    (f"data: {base64.b64encode(RSA_PEM.encode()).decode()}", "PEM private key (base64)"),
    (f'"ssh-privatekey":"{base64.b64encode(SSH_PEM.encode()).decode()}"', "PEM private key (base64)"),
    (base64.b64encode(base64.b64encode(RSA_PEM.encode())).decode(), "PEM private key (base64)"),
    ("headers={'Authorization': 'Bearer abcdef0123456789abcdef'}", "bearer token"),
    (f"token={JWT}", "JWT"),
    (f"x={base64.b64encode(JWT.encode()).decode()}", "JWT (base64)"),
], ids=["pem-in-logfmt", "openssh-pem", "openssh-body-line", "base64-pem", "secret-data-json", "base64-of-base64",
        "bearer", "jwt", "base64-jwt"])
def test_scanner_finds(text: str, kind: str) -> None:
    assert kind in kinds(scan_text(text))


def test_scanner_finds_known_values_verbatim_and_in_base64() -> None:
    known = [SECRET_VALUE]
    assert kinds(scan_text(f"password={SECRET_VALUE}", known=known)) == {"known secret value"}
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    assert "known secret value (base64)" in kinds(scan_text(f"data={encoded}", known=known))
    assert scan_text("password=<redacted>", known=known) == []


def test_scanner_ignores_what_is_public(tmp_path: Path) -> None:
    assert run_certs(tmp_path) == 0
    public = [(tmp_path / certs.CA_CERT).read_text(), (tmp_path / certs.CA_BUNDLE).read_text(),
              "uid=0d5c4e1a-7b2f-4f55-9a53-1f4c7d9f0001 sha256=" + "ab" * 32,
              'msg="tls certificate loaded" serial=2a397fc0e49778180a37c310b6b46daa0d704b75',
              "bearer token refreshed", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC0 user@host"]
    assert scan_text("\n".join(public)) == []


def test_scan_files_and_events(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("ok\n" + RSA_PEM.splitlines()[0] + "\n")
    assert [str(f) for f in scan_files([log])] == [f"{log}:2: PEM private key"]
    events = [{"metadata": {"namespace": "ns", "name": "e1"}, "reason": "Created", "message": "fine"},
              {"metadata": {"namespace": "ns", "name": "e2"}, "note": f"token {JWT}"}]
    assert [str(f) for f in scan_events(events)] == ["event ns/e2:1: JWT"]
    with pytest.raises(AssertionError, match=r"(?s)1 secret\(s\).*event ns/e2:1: JWT") as raised:
        assert_clean(scan_events(events))
    assert JWT not in str(raised.value)
    assert_clean([])


def run_certs(out: Path) -> int:
    return subprocess.run([sys.executable, "-m", "webhook.certs", "--out-dir", str(out), "--ip", "127.0.0.1",
                           "--dns", "localhost"], capture_output=True, cwd=REPO_ROOT, check=False).returncode


class WebhookProcess:
    def __init__(self, tmp: Path) -> None:
        self.tmp, self.log = tmp, tmp / "webhook.log"
        assert run_certs(tmp) == 0
        self.context = ssl.create_default_context(cafile=str(tmp / certs.CA_CERT))
        with socket_port() as port:
            self.port = port
        argv = [sys.executable, "-m", "webhook", "--bind-address", "127.0.0.1", "--port", str(self.port),
                "--tls-cert-file", str(tmp / certs.TLS_CERT), "--tls-key-file", str(tmp / certs.TLS_KEY),
                "--cert-reload-interval", "0.1", "--log-level", "debug"]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.wait(lambda: self.get("/readyz") == 200, "the webhook's /readyz")

    def wait(self, condition: Any, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def wait_for_log(self, pattern: str, what: str) -> None:
        """Until a line of the process's log matches ``pattern`` (a regular expression), within the deadline."""
        line = re.compile(pattern)
        self.wait(lambda: any(line.search(text) for text in self.log.read_text().splitlines()), what)

    def get(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", context=self.context,
                                        timeout=5) as resp:
                return int(resp.status)
        except (urllib.error.URLError, OSError):
            return 0

    def post(self, path: str, body: bytes) -> int:
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)


class socket_port:  # noqa: N801  (a context manager used like a function)
    def __enter__(self) -> int:
        import socket  # noqa: PLC0415

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        port: int = self.sock.getsockname()[1]
        return port

    def __exit__(self, *_: object) -> None:
        self.sock.close()


@pytest.fixture
def webhook_process(tmp_path: Path) -> Iterator[WebhookProcess]:
    process = WebhookProcess(tmp_path)
    try:
        yield process
    finally:
        process.stop()


def secret_job(name: str) -> dict[str, Any]:
    env = [{"name": "KEY", "value": RSA_PEM}, {"name": "TOKEN", "value": f"Bearer {JWT}"},
           {"name": "PASSWORD", "value": SECRET_VALUE}]
    container = {"name": "c", "image": "i", "env": env}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "annotations": {"ssh": SSH_PEM, "b64": base64.b64encode(
                RSA_PEM.encode()).decode()}},
            "spec": {"slotsPerWorker": RSA_PEM,  # a type error whose bad value is a key: rendered in the answer
                     "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [container]}}},
                                         "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}}}}


def test_the_webhook_logs_no_secrets(webhook_process: WebhookProcess) -> None:
    wh = webhook_process
    bodies = [
        orjson.dumps(review(secret_job("pi"))),
        orjson.dumps(review(secret_job("pi"), "UPDATE", old=secret_job("pi"))),
        # uid, name and namespace are logged when they are a UUID and DNS names (identifiers, never secrets)
        orjson.dumps(review(secret_job("pi"), uid=JWT, name=JWT, namespace=f"Bearer {JWT}")),
        orjson.dumps({"apiVersion": RSA_PEM, "kind": f"Bearer {JWT}"}),  # echoed in the 400 message: must not be
        orjson.dumps(review(secret_job("pi")))[:-3] + RSA_PEM.encode(),  # invalid JSON ending in a key
        orjson.dumps(review(secret_job("pi") | {"spec": [RSA_PEM]})),
    ]
    statuses = [wh.post(path, body) for body in bodies for path in (MUTATE_PATH, VALIDATE_PATH)]
    assert 500 not in statuses
    assert {200, 400} <= set(statuses)
    # a bad key file during reload: the warning names the problem, never the key
    tls_key = wh.tmp / certs.TLS_KEY
    good_key = tls_key.read_bytes()
    tls_key.write_text(RSA_PEM)  # a real key, but not the certificate's
    wh.wait_for_log(r'level=warning .*msg="tls certificate not loaded, keeping the previous one"', "the reload warning")
    tls_key.write_bytes(good_key)
    wh.wait_for_log(r'msg="tls certificate loaded" .*\breloads=2\b', "the good key's reload")
    wh.stop()
    log = wh.log.read_text()
    assert log.count('msg=admission') == len(statuses)
    assert_clean(scan_files([wh.log], known=[SECRET_VALUE, RSA_PEM, SSH_PEM, JWT]))
