"""Serving-certificate tooling: extensions, SANs, chain of trust, and the `python -m webhook.certs` CLI."""

from __future__ import annotations

import base64
import ipaddress
import os
import stat
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook import certs

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SERVICE_NAMES = [
    "mpijob-webhook",
    "mpijob-webhook.mpi-operator",
    "mpijob-webhook.mpi-operator.svc",
    "mpijob-webhook.mpi-operator.svc.cluster.local",
]


@pytest.fixture(scope="module")
def ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    return certs.generate_ca("test-ca", days=3650, now=NOW)


@pytest.fixture(scope="module")
def leaf(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]) -> x509.Certificate:
    ips = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    cert, _ = certs.issue_serving_cert(ca[0], ca[1], [*SERVICE_NAMES, "localhost"], ips, days=365, now=NOW)
    return cert


T = TypeVar("T", bound=x509.ExtensionType)


def ext(cert: x509.Certificate, kind: type[T]) -> x509.Extension[T]:
    return cert.extensions.get_extension_for_class(kind)


def test_ca_is_a_self_signed_p256_ca(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]) -> None:
    cert, key = ca
    assert isinstance(key.curve, ec.SECP256R1)
    assert cert.subject == cert.issuer
    cert.verify_directly_issued_by(cert)
    basic = ext(cert, x509.BasicConstraints)
    assert basic.critical
    assert (basic.value.ca, basic.value.path_length) == (True, 0)
    usage = ext(cert, x509.KeyUsage).value
    assert (usage.key_cert_sign, usage.crl_sign, usage.digital_signature) == (True, True, True)
    assert not usage.key_encipherment
    ski = ext(cert, x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(key.public_key())


def test_ca_validity_is_backdated_for_clock_skew(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
) -> None:
    assert ca[0].not_valid_before_utc == NOW - certs.CLOCK_SKEW
    assert ca[0].not_valid_after_utc == NOW + timedelta(days=3650)


def test_serving_cert_extensions(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], leaf: x509.Certificate
) -> None:
    assert ext(leaf, x509.BasicConstraints).value.ca is False
    usage = ext(leaf, x509.KeyUsage).value
    assert usage.digital_signature
    assert not usage.key_encipherment
    assert not usage.key_cert_sign
    assert not usage.crl_sign
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = ext(leaf, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ext(ca[0], x509.SubjectKeyIdentifier).value.digest
    assert leaf.issuer == ca[0].subject
    assert leaf.not_valid_before_utc == NOW - certs.CLOCK_SKEW
    assert leaf.not_valid_after_utc == NOW + timedelta(days=365)


def test_serving_cert_sans(leaf: x509.Certificate) -> None:
    san = ext(leaf, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [*SERVICE_NAMES, "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]


def test_serving_cert_verifies_against_ca(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], leaf: x509.Certificate
) -> None:
    leaf.verify_directly_issued_by(ca[0])
    impostor, _ = certs.generate_ca("test-ca", days=10, now=NOW)  # same name, different key
    with pytest.raises(InvalidSignature):
        leaf.verify_directly_issued_by(impostor)


def test_serving_cert_never_outlives_its_ca() -> None:
    short_ca, key = certs.generate_ca("short", days=30, now=NOW)
    cert, _ = certs.issue_serving_cert(short_ca, key, ["x"], [], days=365, now=NOW)
    assert cert.not_valid_after_utc == short_ca.not_valid_after_utc


def test_serving_cert_needs_a_name(ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]) -> None:
    with pytest.raises(ValueError, match="at least one"):
        certs.issue_serving_cert(ca[0], ca[1], [], [], days=1, now=NOW)


@pytest.mark.parametrize(
    ("domain", "expected"),
    [("cluster.local", SERVICE_NAMES), ("", SERVICE_NAMES[:3])],
    ids=["default-domain", "no-domain"],
)
def test_service_dns_names(domain: str, expected: list[str]) -> None:
    assert certs.service_dns_names("mpijob-webhook", "mpi-operator", domain) == expected


def run_cli(out_dir: Path, *extra: str) -> int:
    return certs.main(["--out-dir", str(out_dir), "--dns", "localhost", "--ip", "127.0.0.1", *extra])


def test_cli_writes_files_with_modes(tmp_path: Path) -> None:
    assert run_cli(tmp_path / "out") == 0
    out = tmp_path / "out"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600, "ca-bundle.b64": 0o644}
    ca_cert, _ = certs.load_ca(out)
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    leaf.verify_directly_issued_by(ca_cert)
    dns = ext(leaf, x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert dns == [*SERVICE_NAMES, "localhost"]
    assert base64.b64decode((out / "ca-bundle.b64").read_text()) == (out / "ca.crt").read_bytes()


def test_cli_reuse_ca_keeps_ca_and_reissues_leaf(tmp_path: Path) -> None:
    assert run_cli(tmp_path) == 0
    ca_before = (tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes()
    leaf_before = (tmp_path / "tls.crt").read_bytes()
    assert run_cli(tmp_path, "--reuse-ca") == 0
    assert ((tmp_path / "ca.crt").read_bytes(), (tmp_path / "ca.key").read_bytes()) == ca_before
    leaf_after = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert leaf_after.serial_number != x509.load_pem_x509_certificate(leaf_before).serial_number
    leaf_after.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_before[0]))


def test_cli_without_reuse_replaces_ca(tmp_path: Path) -> None:
    assert run_cli(tmp_path) == 0
    first = (tmp_path / "ca.crt").read_bytes()
    assert run_cli(tmp_path) == 0
    assert (tmp_path / "ca.crt").read_bytes() != first


def test_cli_reuse_ca_fails_without_a_ca(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "--reuse-ca") == 2
    assert not (tmp_path / "tls.crt").exists()


def test_cli_prints_ca_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(tmp_path, "--print-ca-bundle") == 0
    printed = capsys.readouterr().out.strip()
    assert base64.b64decode(printed) == (tmp_path / "ca.crt").read_bytes()


def test_ca_bundle_can_carry_two_cas(tmp_path: Path) -> None:
    (tmp_path / "old.crt").write_bytes(b"OLD\n")
    (tmp_path / "new.crt").write_bytes(b"NEW\n")
    bundle = certs.ca_bundle_b64(tmp_path / "new.crt", tmp_path / "old.crt")
    assert base64.b64decode(bundle) == b"NEW\nOLD\n"


@pytest.mark.parametrize("bad", [["--days", "0"], ["--ip", "not-an-ip"]], ids=["days", "ip"])
def test_cli_rejects_bad_arguments(tmp_path: Path, bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(tmp_path, *bad)
    assert exc.value.code == 2


def test_module_help_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook.certs", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "--reuse-ca" in result.stdout


README = Path(__file__).resolve().parents[2] / "deploy" / "certs" / "README.md"
DOCKER_RUN = ('docker run --rm --user "$(id -u):$(id -g)" -v "$PWD/webhook-certs:/out" --entrypoint python '
              "mpijob-operator/webhook:dev -m webhook.certs --out-dir /out")
IMAGE_UID = 65532  # Dockerfile.webhook's USER


def test_the_readme_runs_the_image_as_the_owner_of_the_output_directory() -> None:
    text = README.read_text(encoding="utf-8")
    assert f"```sh\nmkdir -p webhook-certs\n{DOCKER_RUN}\n```\n" in text
    assert text.count("docker run") == 1


# The child imports webhook.certs first, then becomes uid (the interpreter, under a root-only home on some
# machines, may not be readable by uid) and writes as uid: the files are created by that uid alone.
_AS_UID = ("import os, sys\n"
           "from webhook import certs\n"
           "uid = int(sys.argv[1])\n"
           "if os.geteuid() != uid:\n"
           "    os.setgroups([]); os.setgid(uid); os.setuid(uid)\n"
           "sys.exit(certs.main(sys.argv[2:]))\n")


def _certs_as(uid: int, out_dir: Path) -> subprocess.CompletedProcess[str]:
    """The README's command without the container: its arguments after ``-m webhook.certs``, run as uid."""
    args = DOCKER_RUN.split(" -m webhook.certs ")[1].replace("/out", str(out_dir)).split()
    assert args == ["--out-dir", str(out_dir)]
    return subprocess.run([sys.executable, "-c", _AS_UID, str(uid), *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=README.parents[2])


def test_the_readme_command_writes_as_the_directory_owner_and_fails_as_another_uid() -> None:
    # As root, the child runs as the image's uid; otherwise as ourselves (already not root).
    uid = IMAGE_UID if os.geteuid() == 0 else os.geteuid()
    with tempfile.TemporaryDirectory() as parent:  # under /tmp: traversable by any uid
        Path(parent).chmod(0o755)
        foreign, owned = Path(parent) / "foreign", Path(parent) / "owned"
        foreign.mkdir(mode=0o755)
        owned.mkdir(mode=0o755)
        if os.geteuid() == 0:
            os.chown(owned, uid, uid)  # as mkdir -p by the user whom --user names
        else:
            foreign.chmod(0o555)  # a directory this uid cannot write, as the bind mount was for uid 65532
        refused = _certs_as(uid, foreign)
        assert refused.returncode == 1
        assert "cannot write the certificates" in refused.stderr
        assert list(foreign.iterdir()) == []
        written = _certs_as(uid, owned)
        assert written.returncode == 0, written.stderr
        files = {p.name: (p.stat().st_uid, stat.S_IMODE(p.stat().st_mode)) for p in owned.iterdir()}
        assert files == {"ca.crt": (uid, 0o644), "ca.key": (uid, 0o600), "tls.crt": (uid, 0o644),
                         "tls.key": (uid, 0o600), "ca-bundle.b64": (uid, 0o644)}
        certs.load_ca(owned)
