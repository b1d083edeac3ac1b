"""ECDSA P-521 key pairs from the libcrypto that Python's own ``ssl`` module already loaded.

The reconciler imports ``ssl`` for its API connections, so OpenSSL is in the process anyway; calling it
through ctypes costs about 0.3 MiB, where importing cryptography (which carries its own copy of OpenSSL)
costs about 9 MiB of RSS that a long-running process never gets back. OpenSSL 3 only (the provider API);
``load`` returns None elsewhere and the caller falls back to cryptography.
"""

from __future__ import annotations

import base64
import ctypes
from typing import Any

_CURVE, _SSH_CURVE = b"P-521", b"nistp521"
_SSH_KEY_TYPE = b"ecdsa-sha2-" + _SSH_CURVE
_BIO_CTRL_INFO = 3  # BIO_get_mem_data is BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
_MAX_POINT = 256  # an uncompressed P-521 point is 133 bytes


class LibCrypto:
    """The few OpenSSL 3 functions a key pair needs, with their C signatures declared."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        vp, cp, ci, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t

        def fn(name: str, restype: Any, *argtypes: Any) -> Any:
            function = getattr(lib, name)  # AttributeError: not OpenSSL 3
            function.restype, function.argtypes = restype, argtypes
            return function

        self.ctx_new = fn("EVP_PKEY_CTX_new_from_name", vp, vp, cp, cp)
        self.ctx_free = fn("EVP_PKEY_CTX_free", None, vp)
        self.keygen_init = fn("EVP_PKEY_keygen_init", ci, vp)
        self.set_group = fn("EVP_PKEY_CTX_set_group_name", ci, vp, cp)
        self.generate = fn("EVP_PKEY_generate", ci, vp, ctypes.POINTER(vp))
        self.pkey_free = fn("EVP_PKEY_free", None, vp)
        self.get_octets = fn("EVP_PKEY_get_octet_string_param", ci, vp, cp, cp, sz, ctypes.POINTER(sz))
        self.bio_s_mem = fn("BIO_s_mem", vp)
        self.bio_new = fn("BIO_new", vp, vp)
        self.bio_free = fn("BIO_free", ci, vp)
        self.bio_ctrl = fn("BIO_ctrl", ctypes.c_long, vp, ci, ctypes.c_long, vp)
        self.write_pem = fn("PEM_write_bio_PrivateKey_traditional", ci, vp, vp, vp, vp, ci, vp, vp)

    def key_pair(self) -> tuple[bytes, bytes]:
        """(PEM ``EC PRIVATE KEY``, OpenSSH ``ecdsa-sha2-nistp521`` line with a newline) of a new key."""
        ctx = self.ctx_new(None, b"EC", None)
        pkey = ctypes.c_void_p()
        try:
            if not ctx or self.keygen_init(ctx) <= 0 or self.set_group(ctx, _CURVE) <= 0 \
                    or self.generate(ctx, ctypes.byref(pkey)) <= 0:
                raise RuntimeError("OpenSSL could not generate an ECDSA P-521 key")
            return self._private_pem(pkey), self._authorized_key(pkey)
        finally:
            if pkey:
                self.pkey_free(pkey)
            self.ctx_free(ctx)

    def _private_pem(self, pkey: ctypes.c_void_p) -> bytes:
        bio = self.bio_new(self.bio_s_mem())
        if not bio:
            raise MemoryError("BIO_new")
        try:
            if self.write_pem(bio, pkey, None, None, 0, None, None) <= 0:
                raise RuntimeError("OpenSSL could not encode the private key")
            data = ctypes.c_void_p()
            length = self.bio_ctrl(bio, _BIO_CTRL_INFO, 0, ctypes.byref(data))
            return ctypes.string_at(data, length) if data and length > 0 else b""
        finally:
            self.bio_free(bio)

    def _authorized_key(self, pkey: ctypes.c_void_p) -> bytes:
        point, length = ctypes.create_string_buffer(_MAX_POINT), ctypes.c_size_t()
        if self.get_octets(pkey, b"encoded-pub-key", point, _MAX_POINT, ctypes.byref(length)) <= 0:
            raise RuntimeError("OpenSSL could not encode the public key")
        blob = b"".join(_ssh_string(part) for part in (_SSH_KEY_TYPE, _SSH_CURVE, point.raw[:length.value]))
        return _SSH_KEY_TYPE + b" " + base64.b64encode(blob) + b"\n"


def _ssh_string(data: bytes) -> bytes:
    """RFC 4251 ``string``: a 4-byte big-endian length, then the bytes."""
    return len(data).to_bytes(4, "big") + data


def load() -> LibCrypto | None:
    """The libcrypto under ``_ssl`` (dlsym on a library also searches its dependencies), or None."""
    import _ssl  # noqa: PLC0415  (already imported by ssl; named here for its file)

    path = getattr(_ssl, "__file__", None)
    if path is None:  # _ssl built into the interpreter
        return None
    try:
        return LibCrypto(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return None
