"""Start-up errors of ``python -m webhook`` and ``python -m webhook.certs``: one clear error line naming the
problem and a non-zero exit status, never a traceback. Each case runs the real command in a subprocess."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook import certs

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT, check=False)


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int, *needles: str) -> str:
    """The process failed with `status`, printed no traceback and exactly one error line holding `needles`."""
    output = result.stdout + result.stderr
    assert result.returncode == status, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if "level=error" in line]
    assert len(errors) == 1, output
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    assert run("webhook.certs", "--out-dir", str(out), "--ip", "127.0.0.1").returncode == 0
    return out


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_certs_out_dir_under_a_missing_parent(tmp_path: Path) -> None:
    # /proc refuses new directories even to root, which ignores permission bits.
    result = run("webhook.certs", "--out-dir", "/proc/no-such-dir/certs")
    assert_one_error_line(result, 1, 'msg="cannot write the certificates"', "out_dir=/proc/no-such-dir/certs",
                          "No such file or directory: /proc/no-such-dir")


def test_certs_out_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run("webhook.certs", "--out-dir", str(tmp_path / "file" / "certs"))
    assert_one_error_line(result, 1, "cannot write the certificates", "Not a directory")


def test_certs_out_dir_unwritable(tmp_path: Path) -> None:
    result = run("webhook.certs", "--out-dir", "/proc/self")  # exists, but no files can be created in it
    line = assert_one_error_line(result, 1, "cannot write the certificates", "out_dir=/proc/self")
    assert "error=" in line


def test_certs_reuse_ca_missing(tmp_path: Path) -> None:
    result = run("webhook.certs", "--out-dir", str(tmp_path), "--reuse-ca")
    assert_one_error_line(result, 2, "cannot reuse the CA", f"No such file or directory: {tmp_path / certs.CA_CERT}")


@pytest.mark.parametrize(("args", "needle"), [
    (["--dns", "bücher.example"], "A-label"),
    (["--ca-days", "99999999"], "date value out of range"),
], ids=["non-ascii-dns-name", "validity-past-year-9999"])
def test_certs_impossible_certificate(tmp_path: Path, args: list[str], needle: str) -> None:
    result = run("webhook.certs", "--out-dir", str(tmp_path), *args)
    assert_one_error_line(result, 2, "cannot build the certificates", needle)
    assert not list(tmp_path.iterdir())


def serve_args(cert: Path, key: Path, *extra: str) -> list[str]:
    return ["--bind-address", "127.0.0.1", "--tls-cert-file", str(cert), "--tls-key-file", str(key), *extra]


def test_webhook_missing_certificate_files(tmp_path: Path) -> None:
    result = run("webhook", *serve_args(tmp_path / "tls.crt", tmp_path / "tls.key"))
    assert_one_error_line(result, 1, "serving certificate could not be loaded",
                          f"No such file or directory: {tmp_path / 'tls.crt'}")


@pytest.mark.parametrize(("which", "needle"), [("cert", "certificate: "), ("key", "private key: ")])
def test_webhook_garbage_certificate_files(tmp_path: Path, bundle: Path, which: str, needle: str) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n")
    cert = garbage if which == "cert" else bundle / certs.TLS_CERT
    key = garbage if which == "key" else bundle / certs.TLS_KEY
    line = assert_one_error_line(run("webhook", *serve_args(cert, key)), 1, "serving certificate could not be loaded",
                                 needle)
    assert "https://" not in line  # cryptography's FAQ link is noise in a one-line message


def test_webhook_mismatched_key(tmp_path: Path, bundle: Path) -> None:
    result = run("webhook", *serve_args(bundle / certs.TLS_CERT, bundle / certs.CA_KEY))
    assert_one_error_line(result, 1, "private key does not match the certificate")


def test_webhook_port_in_use(bundle: Path, busy_port: int) -> None:
    result = run("webhook", *serve_args(bundle / certs.TLS_CERT, bundle / certs.TLS_KEY, "--port", str(busy_port)))
    assert_one_error_line(result, 1, "cannot listen", f"port={busy_port}", "address already in use")


def test_webhook_health_port_in_use(bundle: Path, busy_port: int) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    result = run("webhook", *serve_args(bundle / certs.TLS_CERT, bundle / certs.TLS_KEY, "--port", str(free),
                                        "--health-port", str(busy_port)))
    assert_one_error_line(result, 1, "cannot listen", f"port={busy_port}")


def test_webhook_unknown_bind_address(bundle: Path) -> None:
    result = run("webhook", "--tls-cert-file", str(bundle / certs.TLS_CERT), "--tls-key-file",
                 str(bundle / certs.TLS_KEY), "--bind-address", "no-such-host.invalid", "--port", "1")
    assert_one_error_line(result, 1, "cannot listen", "address=no-such-host.invalid")
