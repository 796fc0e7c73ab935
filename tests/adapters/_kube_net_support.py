"""Real network pieces on 127.0.0.1 for the kubeconfig transport tests: a
throwaway CA issuing server and client certificates, an HTTPS server that
records what each request carried (SNI name, headers, client certificate),
and a CONNECT proxy that records the tunnels it opened."""

from __future__ import annotations

import datetime
import ipaddress
import json
import select
import socket
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem(key: Any) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CA:
    def __init__(self, name: str = "kubeconfig-test-ca") -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common: str, names: tuple[str, ...] = (), client: bool = False
              ) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM) for a server (DNS/IP names) or a client."""
        now = datetime.datetime.now(datetime.timezone.utc)
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(common))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.CLIENT_AUTH if client
                        else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        if names:
            alt: list[x509.GeneralName] = []
            for n in names:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(n)))
                except ValueError:
                    alt.append(x509.DNSName(n))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _pem(key)


class TLSServer:
    """HTTPS on 127.0.0.1 answering every GET with an empty PodList; ``seen``
    holds one dict per request: path, headers (a list of pairs), sni, client."""

    def __init__(self, cert: bytes, key: bytes, client_ca: bytes | None = None) -> None:
        self.seen: list[dict[str, Any]] = []
        self.sni: list[str | None] = []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "c.pem").write_bytes(cert)
            Path(folder, "k.pem").write_bytes(key)
            context.load_cert_chain(Path(folder, "c.pem"), Path(folder, "k.pem"))
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=client_ca.decode())

        def remember(sock: Any, name: str | None, ctx: Any) -> None:
            self.sni.append(name)
        context.sni_callback = remember
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                peer = self.connection.getpeercert()
                client = None
                if peer:
                    client = dict(x[0] for x in peer["subject"]).get("commonName")
                outer.seen.append({"path": self.path, "headers": list(self.headers.items()),
                                   "sni": outer.sni[-1] if outer.sni else None,
                                   "client": client})
                data = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                   "items": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # refused handshakes are what some tests are about

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> TLSServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1; ``tunnels`` lists each CONNECT's
    target as asked. ``to`` sends every tunnel to that (host, port) instead,
    so a test can ask for a name that does not resolve."""

    def __init__(self, to: tuple[str, int] | None = None) -> None:
        self.tunnels: list[str] = []
        self.to = to
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> ConnectProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            if method != "CONNECT":
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.tunnels.append(target)
            host, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection(self.to or (host, int(port)), timeout=5)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            with upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                pair = {client: upstream, upstream: client}
                while True:
                    ready, _, _ = select.select(list(pair), [], [], 5)
                    if not ready:
                        return
                    for sock in ready:
                        data = sock.recv(65536)
                        if not data:
                            return
                        pair[sock].sendall(data)
