"""Certificate hot reload over real TLS: rotation reaches new connections, old ones keep working,
bad files never break the listener. Every wait polls a condition against a deadline."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest
from aiohttp import ClientSession, TCPConnector, web
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pytest_aiohttp import AiohttpServer

from tests.webhook.conftest import review
from webhook import certs
from webhook.app import MUTATE_PATH, VALIDATE_PATH, create_app
from webhook.tls import CertificateReloader

T = TypeVar("T")
POLL = 0.05
RELEASE = web.AppKey("release", asyncio.Event)
STARTED = web.AppKey("started", asyncio.Event)


@dataclass
class Pki:
    """A CA and the Kubernetes-style Secret volume holding the serving pair."""

    ca_cert: x509.Certificate
    ca_key: ec.EllipticCurvePrivateKey
    ca_file: Path
    secret_dir: Path

    def issue(self) -> tuple[bytes, bytes, int]:
        ip = [ipaddress.ip_address("127.0.0.1")]
        now = self.ca_cert.not_valid_before_utc + certs.CLOCK_SKEW
        cert, key = certs.issue_serving_cert(self.ca_cert, self.ca_key, ["localhost"], ip, days=1, now=now)
        return certs.cert_pem(cert), certs.key_pem(key), cert.serial_number

    def publish(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Swap in a new pair the way kubelet updates a Secret volume: new dir, atomic `..data` symlink."""
        version = self.secret_dir / f"..{uuid.uuid4().hex}"
        version.mkdir()
        (version / "tls.crt").write_bytes(cert_pem)
        (version / "tls.key").write_bytes(key_pem)
        tmp = self.secret_dir / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.secret_dir / "..data")
        for name in ("tls.crt", "tls.key"):
            if not (self.secret_dir / name).is_symlink():
                (self.secret_dir / name).symlink_to(f"..data/{name}")


@dataclass
class Served:
    pki: Pki
    reloader: CertificateReloader
    port: int
    app: web.Application
    serial: int
    pair: tuple[bytes, bytes]


def watching(reloader: CertificateReloader) -> Callable[[web.Application], AsyncIterator[None]]:
    """An aiohttp ``cleanup_ctx`` hook: the reloader watches its files while the application runs."""
    async def hook(_app: web.Application) -> AsyncIterator[None]:
        async with reloader:
            yield

    return hook


def loaded_serial(reloader: CertificateReloader) -> int | None:
    return reloader.loaded.serial if reloader.loaded else None


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca_cert, ca_key = certs.generate_ca("reload-test-ca", days=2, now=datetime.now(UTC))
    (tmp_path / "ca.crt").write_bytes(certs.cert_pem(ca_cert))
    (tmp_path / "secret").mkdir()
    return Pki(ca_cert, ca_key, tmp_path / "ca.crt", tmp_path / "secret")


@pytest.fixture
async def served(pki: Pki, aiohttp_server: AiohttpServer) -> Served:
    cert_pem, key_pem, serial = pki.issue()
    pki.publish(cert_pem, key_pem)
    reloader = CertificateReloader(pki.secret_dir / "tls.crt", pki.secret_dir / "tls.key", poll_interval=POLL)
    app = make_app()
    app.cleanup_ctx.append(watching(reloader))
    server = await aiohttp_server(app, ssl=reloader.context)
    assert server.port is not None
    return Served(pki, reloader, server.port, app, serial, (cert_pem, key_pem))


def make_app() -> web.Application:
    async def ping(_: web.Request) -> web.Response:
        return web.Response(text="pong")

    async def slow(request: web.Request) -> web.Response:
        request.app[STARTED].set()
        await request.app[RELEASE].wait()
        return web.Response(text="done")

    app = web.Application()
    app[RELEASE], app[STARTED] = asyncio.Event(), asyncio.Event()
    app.router.add_get("/ping", ping)
    app.router.add_get("/slow", slow)
    return app


class Connection:
    """A raw keep-alive HTTP/1.1 connection over TLS that exposes the certificate it was served."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        self.serial = x509.load_der_x509_certificate(der).serial_number

    @classmethod
    async def open(cls, port: int, ca_file: Path) -> Connection:
        context = ssl.create_default_context(cafile=str(ca_file))
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
        return cls(reader, writer)

    def send(self, path: str) -> None:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())

    async def receive(self) -> tuple[int, bytes]:
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:] if line)
        body = await self.reader.readexactly(int(headers["Content-Length"]))
        return int(head[0].split()[1]), body

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def served_serial(port: int, ca_file: Path) -> int:
    """Serial of the certificate a brand-new connection gets (the handshake verifies it against the CA)."""
    conn = await Connection.open(port, ca_file)
    await conn.close()
    return conn.serial


async def eventually(probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], within: float = 10.0) -> T:
    """Poll `probe` until `accept` holds; fail the test after `within` seconds."""
    seen: list[T] = []
    try:
        async with asyncio.timeout(within):
            while not accept(value := await probe()):
                seen[:] = [value]
                await asyncio.sleep(POLL / 2)
            return value
    except TimeoutError:
        raise AssertionError(f"condition not met within {within}s, last value {seen!r}") from None


async def test_initial_certificate_is_served(served: Served) -> None:
    assert served.reloader.ready
    assert loaded_serial(served.reloader) == served.serial
    assert await served_serial(served.port, served.pki.ca_file) == served.serial
    assert served.reloader.describe()["serial"] == format(served.serial, "x")


async def test_rotation_reaches_new_connections_without_dropping_old_ones(served: Served) -> None:
    old = await Connection.open(served.port, served.pki.ca_file)
    old.send("/ping")
    assert await old.receive() == (200, b"pong")
    old.send("/slow")  # in flight across the rotation
    await eventually(sync_probe(served.app[STARTED].is_set), bool)

    cert_pem, key_pem, new_serial = served.pki.issue()
    served.pki.publish(cert_pem, key_pem)
    await eventually(lambda: served_serial(served.port, served.pki.ca_file), lambda s: s == new_serial)
    assert loaded_serial(served.reloader) == new_serial
    assert served.reloader.reload_count == 2

    served.app[RELEASE].set()
    assert await old.receive() == (200, b"done")
    old.send("/ping")  # the keep-alive connection still works, on its original certificate
    assert await old.receive() == (200, b"pong")
    assert old.serial == served.serial
    await old.close()


def _encrypted(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )


BAD_PAIRS: dict[str, Callable[[tuple[bytes, bytes], tuple[bytes, bytes]], tuple[bytes, bytes]]] = {
    "garbage-key": lambda _old, new: (new[0], b"-----BEGIN PRIVATE KEY-----\ngarbage\n"),
    "empty-key": lambda _old, new: (new[0], b""),
    "truncated-cert": lambda _old, new: (new[0][: len(new[0]) // 2], new[1]),
    "new-cert-old-key": lambda old, new: (new[0], old[1]),
    "encrypted-key": lambda _old, new: (new[0], _encrypted(new[1])),
}


@pytest.mark.parametrize("kind", BAD_PAIRS, ids=list(BAD_PAIRS))
async def test_bad_pair_keeps_old_certificate(served: Served, kind: str) -> None:
    cert_pem, key_pem, new_serial = served.pki.issue()
    served.pki.publish(*BAD_PAIRS[kind](served.pair, (cert_pem, key_pem)))
    await eventually(sync_probe(lambda: served.reloader.failure_count), lambda n: n >= 1)
    assert served.reloader.ready
    assert served.reloader.last_error
    assert loaded_serial(served.reloader) == served.serial
    assert await served_serial(served.port, served.pki.ca_file) == served.serial  # context not corrupted

    served.pki.publish(cert_pem, key_pem)  # the writer finishes: the next poll picks up the good pair
    await eventually(lambda: served_serial(served.port, served.pki.ca_file), lambda s: s == new_serial)
    assert served.reloader.last_error is None


async def test_missing_files_then_appear(pki: Pki) -> None:
    reloader = CertificateReloader(pki.secret_dir / "tls.crt", pki.secret_dir / "tls.key", poll_interval=POLL)
    async with reloader:
        assert not reloader.ready
        assert reloader.failure_count == 1
        reloader.reload()  # the same missing-file state is reported once, not on every poll
        assert reloader.failure_count == 1
        cert_pem, key_pem, serial = pki.issue()
        pki.publish(cert_pem, key_pem)
        await eventually(sync_probe(lambda: loaded_serial(reloader)), lambda s: s == serial)
    assert reloader.describe()["ready"] is True


async def test_only_http11_is_offered(served: Served) -> None:
    context = ssl.create_default_context(cafile=str(served.pki.ca_file))
    context.set_alpn_protocols(["h2", "http/1.1"])
    _, writer = await asyncio.open_connection("127.0.0.1", served.port, ssl=context, server_hostname="localhost")
    assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
    writer.close()
    await writer.wait_closed()
    assert served.reloader.context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_poll_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        CertificateReloader("a", "b", poll_interval=0)


def sync_probe(read: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """Adapt a synchronous read to `eventually`'s async probe."""

    async def probe() -> T:
        return read()

    return probe


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    yield
    leaked = [t for t in asyncio.all_tasks() if t.get_name() == "tls-certificate-reloader"]
    assert not leaked, "the reloader task outlived its owner"


ROTATIONS = 5
CLIENTS = 8


async def test_rotation_under_admission_load_fails_no_request(pki: Pki, aiohttp_server: AiohttpServer) -> None:
    """The real admission app over TLS, several clients (fresh handshakes and keep-alive connections) sending
    AdmissionReviews without pause while the serving certificate is rotated several times: every admission
    answers 200, and the rotations reach new connections."""
    cert_pem, key_pem, first_serial = pki.issue()
    pki.publish(cert_pem, key_pem)
    reloader = CertificateReloader(pki.secret_dir / "tls.crt", pki.secret_dir / "tls.key", poll_interval=POLL)
    app = create_app(ready_check=lambda: reloader.ready)
    app.cleanup_ctx.append(watching(reloader))
    server = await aiohttp_server(app, ssl=reloader.context)
    port = server.port
    assert port is not None
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"}, "spec": {
        "mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}}
    body = review(job)
    stop = asyncio.Event()
    answered: list[int] = [0] * CLIENTS
    failures: list[str] = []

    async def client(index: int) -> None:
        context = ssl.create_default_context(cafile=str(pki.ca_file))
        connector = TCPConnector(ssl=context, force_close=index % 2 == 0)  # even clients handshake every time
        path = MUTATE_PATH if index % 3 else VALIDATE_PATH
        async with ClientSession(connector=connector) as session:
            while not stop.is_set():
                try:
                    async with session.post(f"https://localhost:{port}{path}", json=body) as resp:
                        answer = await resp.json()
                        if resp.status != 200 or answer["response"]["uid"] != body["request"]["uid"]:
                            failures.append(f"client {index}: {resp.status} {answer}")
                except Exception as error:  # a failed handshake or a dropped connection is a failed admission
                    failures.append(f"client {index}: {type(error).__name__}: {error}")
                answered[index] += 1

    tasks = [asyncio.create_task(client(i)) for i in range(CLIENTS)]
    serials = [first_serial]
    try:
        for _ in range(ROTATIONS):
            await asyncio.sleep(0.3)
            cert_pem, key_pem, serial = pki.issue()
            pki.publish(cert_pem, key_pem)
            await eventually(lambda: served_serial(port, pki.ca_file), serial.__eq__)
            serials.append(serial)
        await asyncio.sleep(0.3)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert not failures, failures[:5]
    assert reloader.reload_count == ROTATIONS + 1
    assert len(set(serials)) == ROTATIONS + 1
    assert all(n > 10 for n in answered), answered
    print(f"tls rotation under load: {ROTATIONS} rotations, {CLIENTS} clients, {sum(answered)} admissions, "
          f"{len(failures)} failed")


class SwappedUnderUs:
    """A file whose content changes after the first read, as when kubelet swaps the volume's `..data` link between
    the reloader's read of the certificate and of the key."""

    def __init__(self, *contents: bytes) -> None:
        self.contents, self.reads = list(contents), 0

    def read_bytes(self) -> bytes:
        self.reads += 1
        return self.contents[min(self.reads, len(self.contents)) - 1]


def test_a_pair_swapped_between_two_reads_is_read_again_not_counted_as_a_failure(pki: Pki) -> None:
    old_cert, _old_key, _ = pki.issue()
    new_cert, new_key, new_serial = pki.issue()
    reloader = CertificateReloader(pki.secret_dir / "tls.crt", pki.secret_dir / "tls.key", poll_interval=POLL)
    cert_file = SwappedUnderUs(old_cert, new_cert)  # the old certificate, then the new one for good
    reloader.cert_file, reloader.key_file = cert_file, SwappedUnderUs(new_key)  # type: ignore[assignment]
    assert reloader.reload()
    assert (loaded_serial(reloader), reloader.failure_count, reloader.last_error) == (new_serial, 0, None)
    assert cert_file.reads == 3  # old, new (after the key: changed), new again (steady)
