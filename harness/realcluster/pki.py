"""The control plane's certificates, made with the ``openssl`` command.

Two CAs: the cluster CA (serving certs of the apiserver and the webhooks,
client certs of every component) and the front-proxy CA (the apiserver's
client cert towards aggregated APIs such as Kueue's visibility server); plus the
service-account signing key pair. Everything is written once into ``pki/`` of
the state folder and reused by later bring-ups of the same state.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LOOPBACK_SANS = "IP:127.0.0.1,DNS:localhost"
#: ECDSA P-256 keys: generated in milliseconds (RSA keys took a minute on a busy machine).
_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def _ca(pki: Path, name: str, cn: str) -> None:
    if (pki / f"{name}.crt").exists():
        return
    _openssl("req", "-x509", "-new", "-nodes", *_EC, "-sha256",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "3650",
             "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             cwd=pki)


def _leaf(pki: Path, name: str, *, ca: str, subject: str, sans: str | None = None) -> None:
    if (pki / f"{name}.crt").exists():
        return
    ext = pki / f"{name}.ext"
    lines = ["basicConstraints=critical,CA:FALSE",
             "keyUsage=critical,digitalSignature",
             "extendedKeyUsage=serverAuth,clientAuth",
             # Python 3.13's strict verification wants both key identifiers.
             "subjectKeyIdentifier=hash", "authorityKeyIdentifier=keyid,issuer"]
    if sans:
        lines.append(f"subjectAltName={sans}")
    ext.write_text("\n".join(lines) + "\n")
    _openssl("req", "-new", "-nodes", *_EC, "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-sha256", "-days", "825", "-extfile", ext.name,
             "-out", f"{name}.crt", cwd=pki)
    (pki / f"{name}.csr").unlink()
    ext.unlink()


def make_pki(pki: Path) -> None:
    """Create (once) every key and certificate the control plane uses under ``pki``."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is needed for the control plane's certificates "
                           "(apt-get install openssl)")
    pki.mkdir(parents=True, exist_ok=True)
    _ca(pki, "ca", "gpu-quota-portal-realcluster-ca")
    _ca(pki, "front-proxy-ca", "gpu-quota-portal-realcluster-front-proxy-ca")
    _leaf(pki, "apiserver", ca="ca", subject="/CN=kube-apiserver",
          sans=f"{LOOPBACK_SANS},IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,"
               "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
    _leaf(pki, "front-proxy-client", ca="front-proxy-ca", subject="/CN=front-proxy-client")
    # Client identities. Kueue, JobSet and KWOK run as cluster admins (as their
    # own installs grant them most of the API); the controller manager and the
    # scheduler use the identities the default RBAC policy binds.
    _leaf(pki, "admin", ca="ca", subject="/O=system:masters/CN=realcluster-admin")
    _leaf(pki, "kube-controller-manager", ca="ca", subject="/CN=system:kube-controller-manager")
    _leaf(pki, "kube-scheduler", ca="ca", subject="/CN=system:kube-scheduler")
    # One serving cert for every loopback webhook and the visibility server.
    _leaf(pki, "serving", ca="ca", subject="/CN=localhost", sans=LOOPBACK_SANS)
    if not (pki / "sa.key").exists():
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
        _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def serving_dir(pki: Path, name: str) -> Path:
    """A folder holding the serving cert as ``tls.crt``/``tls.key`` (controller-runtime's names)."""
    folder = pki / name
    folder.mkdir(exist_ok=True)
    for src, dst in (("serving.crt", "tls.crt"), ("serving.key", "tls.key"), ("ca.crt", "ca.crt")):
        if not (folder / dst).exists():
            shutil.copyfile(pki / src, folder / dst)
    return folder
