"""A local certificate authority for the HTTPS endpoint that kubectl reaches after get-credentials.

``gcloud container clusters get-credentials`` writes ``server: https://<endpoint>`` and, when the cluster
reports a CA certificate, ``certificate-authority-data``. flexq makes a CA and a server certificate under
``FLEXQ_HOME/tls`` (once; reused after), serves HTTPS with it, and reports the CA in the cluster resource, so
kubectl verifies the server as it would a GKE control plane. The server certificate names ``localhost``,
``127.0.0.1`` and the addresses the server is reached at; it is issued again (by the same CA) when a start
needs a name it lacks, so kubeconfigs written earlier stay valid.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["TlsFiles", "ensure_certificates"]


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path

    def ca_pem(self) -> bytes:
        return self.ca.read_bytes()


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "flexq")])


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(0o600)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _names_of(cert_path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(v) for v in sans.get_values_for_type(x509.DNSName)} | {
        str(v) for v in sans.get_values_for_type(x509.IPAddress)}


def _new_ca(folder: Path, now: datetime.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("flexq local CA")).issuer_name(_name("flexq local CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=3650))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .sign(ca_key, hashes.SHA256()))
    (folder / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _private(folder / "ca.key", _pem_key(ca_key))
    return ca_key, ca_cert


def ensure_certificates(home: Path, hosts: Iterable[str] = ()) -> TlsFiles:
    """The CA and a server certificate valid for localhost, 127.0.0.1 and ``hosts``."""
    folder = home / "tls"
    files = TlsFiles(folder / "ca.crt", folder / "server.crt", folder / "server.key")
    wanted = {"localhost", "127.0.0.1", *hosts}
    with contextlib.suppress(OSError, ValueError):
        if files.key.exists() and wanted <= _names_of(files.cert) and files.ca.exists():
            return files
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    now = datetime.datetime.now(datetime.UTC)
    try:
        ca_key = serialization.load_pem_private_key((folder / "ca.key").read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(files.ca.read_bytes())
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise ValueError("not an EC key")
    except (OSError, ValueError):
        ca_key, ca_cert = _new_ca(folder, now)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("flexq")).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=825))
            .add_extension(x509.SubjectAlternativeName([_general_name(h) for h in sorted(wanted)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    _private(files.key, _pem_key(key))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files
