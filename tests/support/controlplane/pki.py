"""The control plane's certificates and keys, made fresh for each state directory.

One CA signs everything: the API server's and KWOK's serving certificates (for 127.0.0.1) and a
client certificate per identity.  The identities are the ones a kubeadm cluster uses, so RBAC
sees the same users: ``system:kube-controller-manager`` and ``system:kube-scheduler`` (bound by
the API server's bootstrap policy), an admin in ``system:masters``, and the API server's client
for kubelets (KWOK serves ``pods/log`` as the kubelet would).  A separate RSA key pair signs and
verifies ServiceAccount tokens.

As in kubeadm, a second CA (the front proxy's) signs only the client certificate the API server's
aggregator presents to aggregated API servers (Kueue's visibility API): they trust the user it
names in its request headers because that CA signed it, and no other client of the cluster CA
can pass for the aggregator.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .node_identity import ALL_NODES, NODE_1

# Names the API server's certificate must carry: loopback for us, the in-cluster names for
# clients that connect through the `kubernetes` Service (the master's default).
SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
# Each real node's address (realnode.py), where that node's relay to the API server listens.
NODE_IP = NODE_1.ip
SERVER_IPS = ("127.0.0.1", "10.96.0.1", *(node.ip for node in ALL_NODES))

CLIENTS = {
    "admin": ("paddle-nbext-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "kwok": ("paddle-nbext-kwok", ("system:masters",)),
    "kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
}
#: The common name of the aggregator's client certificate (``--requestheader-allowed-names``).
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class Pki:
    """Paths of everything in ``directory``; ``client(name)`` gives a client's (cert, key)."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def apiserver_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def kwok_cert(self) -> Path:
        return self.directory / "kwok-serving.crt"

    @property
    def kwok_key(self) -> Path:
        return self.directory / "kwok-serving.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.directory / "front-proxy-ca.crt"

    @property
    def front_proxy_client(self) -> tuple[Path, Path]:
        return self.directory / "front-proxy-client.crt", self.directory / "front-proxy-client.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_pub(self) -> Path:
        return self.directory / "sa.pub"

    def client(self, name: str) -> tuple[Path, Path]:
        return self.directory / f"{name}.crt", self.directory / f"{name}.key"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _name(common: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _builder(subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
    )


def _ca(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    ca_key = _key()
    ca_name = _name(common)
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
    return ca_key, ca


def create(directory: Path) -> Pki:
    """Make the CAs and every certificate and key in ``directory`` (created; existing files replaced)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    ca_key, ca = _ca("paddle-nbext-test-ca")
    _write(pki.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
    _write(directory / "ca.key", _pem_key(ca_key))

    def issue(
        cert_path: Path,
        key_path: Path,
        subject: x509.Name,
        *,
        server: bool,
        names: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        signer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] = (ca_key, ca),
    ) -> None:
        key = _key()
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            _builder(subject, signer[1].subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if names or ips:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(signer[0], hashes.SHA256())
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, _pem_key(key))

    issue(pki.apiserver_cert, pki.apiserver_key, _name("kube-apiserver"), server=True, names=SERVER_NAMES, ips=SERVER_IPS)
    issue(pki.kwok_cert, pki.kwok_key, _name("kwok-kubelet"), server=True, names=("localhost",), ips=("127.0.0.1",))
    for client, (common, organizations) in CLIENTS.items():
        cert_path, key_path = pki.client(client)
        issue(cert_path, key_path, _name(common, organizations), server=False)
    front_proxy_key, front_proxy_ca = _ca("paddle-nbext-front-proxy-ca")
    _write(pki.front_proxy_ca_cert, front_proxy_ca.public_bytes(serialization.Encoding.PEM))
    issue(*pki.front_proxy_client, _name(FRONT_PROXY_CLIENT), server=False, signer=(front_proxy_key, front_proxy_ca))

    signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(pki.service_account_key, _pem_key(signing))
    _write(
        pki.service_account_pub,
        signing.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    return pki


def issue_later(
    pki: Pki,
    name: str,
    *,
    common: str,
    organizations: tuple[str, ...] = (),
    server: bool = False,
    names: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """A certificate and key signed by the existing CA of ``pki`` (``<name>.crt``/``.key``): a
    client identity, or with ``server`` a serving pair for 127.0.0.1 (a webhook's) that also
    carries the DNS ``names`` (an aggregated API server's ``<service>.<namespace>.svc``, the name
    the aggregator checks) and the addresses ``ips`` (the real node's kubelet).  For the components only some clusters run (the queueing
    controllers), so the others do not make them."""
    ca_key = serialization.load_pem_private_key((pki.directory / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_name = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
    key = _key()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(_name(common, organizations), ca_name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in ("localhost", *names)]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", *ips)]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert_path, key_path = pki.client(name)
    _write(cert_path, builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    _write(key_path, _pem_key(key))
    return cert_path, key_path
