"""Certificates for the TLS tests, made here with `cryptography` (a CA, and certs it signs)."""

import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path, key):
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _cert(subject, key, issuer, issuer_key, *, ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject)).issuer_name(_name(issuer))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        # key identifiers and a CA's key usage, as RFC 5280 asks: Python 3.13's default TLS context
        # verifies strictly (VERIFY_X509_STRICT) and refuses a chain without them
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory, ca_name):
    """A CA plus a scheduler, a worker and a client certificate signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files = {"ca": directory / "ca.pem"}
    for who in ("scheduler", "worker", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(f"{who}.{ca_name}", key, ca_name, ca_key, ca=False)
        (directory / f"{who}-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(directory / f"{who}-key.pem", key)
        files[f"{who}_cert"] = directory / f"{who}-cert.pem"
        files[f"{who}_key"] = directory / f"{who}-key.pem"
    return files


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    base = tmp_path_factory.mktemp("pki")
    return {"good": make_pki(base / "good", "dkapprox-test-ca"),
            "other": make_pki(base / "other", "some-other-ca")}
