"""A Temporal frontend behind mutual TLS, for the connection tests: certificates from a
throwaway CA, and a TLS terminator in front of the real dev server (as a load balancer
or Temporal Cloud's front door would be), which asks every client for a certificate of
that CA and passes the decrypted gRPC stream through.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAME = "temporal.duragent.test"
"""The name on the server's certificate (not the address's host: TLS_SERVER_NAME says it)."""


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(folder: Path) -> Certificates:
    """A CA, a server certificate for `SERVER_NAME` and a client certificate, as PEM files."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "duragent test CA")])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = Certificates(*(folder / name for name in _FILES))
    _write_cert(files.ca, ca)
    for name, usage, cert_path, key_path in (
        (SERVER_NAME, ExtendedKeyUsageOID.SERVER_AUTH, files.server_cert, files.server_key),
        ("a duragent worker", ExtendedKeyUsageOID.CLIENT_AUTH, files.client_cert, files.client_key),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = _builder(subject, ca_name, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if usage == ExtendedKeyUsageOID.SERVER_AUTH:
            sans = [x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        _write_cert(cert_path, builder.sign(ca_key, hashes.SHA256()))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return files


_FILES = ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class TlsTerminator:
    """Listens with TLS on a free local port (`address`), requires a client certificate of
    the CA, and pipes each connection to the plain `upstream` (`host:port`)."""

    def __init__(self, certs: Certificates, upstream: str) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=certs.ca)
        self._context.load_cert_chain(certs.server_cert, certs.server_key)
        self._context.verify_mode = ssl.CERT_REQUIRED
        self._context.set_alpn_protocols(["h2"])  # gRPC is HTTP/2
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._server: asyncio.Server | None = None
        self.handshakes_refused = 0
        self.connections = 0

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> TlsTerminator:
        loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self._context, ssl_handshake_timeout=10
        )
        # A refused handshake is the client's failure to report, not an error here.
        loop.set_exception_handler(self._on_loop_error)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        asyncio.get_running_loop().set_exception_handler(None)

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if isinstance(context.get("exception"), ssl.SSLError):
            self.handshakes_refused += 1
            return
        loop.default_exception_handler(context)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
