"""A reverse proxy that wants a bearer token, in front of a Chroma server, as users deploy one (Caddy, nginx).

It listens on loopback, over plain HTTP or TLS (a certificate made in the test: `make_tls`),
forwards a request to the Chroma server only when `Authorization: Bearer <token>` is right
(401 otherwise), and answers 502 when the server behind it is down, as Caddy does. It notes
the paths it forwarded, so a test sees what reached the server.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Request headers not passed on (hop-by-hop, or rewritten for the upstream).
_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "authorization", "proxy-connection"}


@dataclass(frozen=True)
class Tls:
    """A certificate authority and the proxy's certificate for 127.0.0.1 and localhost, signed by it."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_tls(folder: Path) -> Tls:
    """A fresh CA and a server certificate it signed, as PEM files in `folder` (needs `cryptography`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ocat test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    tls = Tls(folder / "ca.pem", folder / "proxy.pem", folder / "proxy-key.pem")
    tls.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    tls.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return tls


class TokenProxy:
    """The proxy: started with `start`, its address in `url`, stopped with `stop`."""

    def __init__(self, upstream_port: int, token: str, tls: Tls | None = None) -> None:
        self.upstream_port = upstream_port
        self.token = token
        self.tls = tls
        self.forwarded: list[str] = []  # the paths passed on to the server, in order
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: pytest shows what a test prints

            def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.headers.get("Authorization") != f"Bearer {proxy.token}":
                    proxy.refused += 1
                    self._answer(401, b"unauthorized\n")
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                except OSError:
                    self._answer(502, b"bad gateway\n")
                    return
                finally:
                    upstream.close()
                proxy.forwarded.append(self.path)
                self._answer(answer.status, data, answer.getheader("Content-Type") or "application/json")

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert_file, tls.key_file)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="token-proxy", daemon=True)  # stop() waits up to one poll

    @property
    def url(self) -> str:
        """The proxy's address as `vector_store.url` takes it."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> TokenProxy:
        """Serve in a thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)
