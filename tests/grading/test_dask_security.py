"""The Dask commands autograder/README.md documents: on one machine they listen on 127.0.0.1 only
(the notebooks they carry hold the hidden tests), and between machines over TLS a worker without a
certificate from the course's CA is refused (issue 23). The commands are read from the README and
run as written, with this test's ports, files and one worker."""

from __future__ import annotations

import datetime
import ipaddress
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_grading_scale import free_port

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "autograder" / "README.md"


def documented(after: str) -> list[str]:
    """The `dask ...` commands of the first sh block after the line containing `after`."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text[text.index(after):], re.S).group(1)
    lines = block.replace("\\\n", " ").splitlines()
    return [re.sub(r"\s+#.*$", "", line).strip() for line in lines if line.strip().startswith("dask ")]


def dask(command: str, **subs: str) -> list[str]:
    """A documented command line with this test's values; `dask` is the venv's."""
    for old, new in subs.items():
        command = command.replace(old, new)
    args = shlex.split(command)
    args = [a if a != "4" or prev != "--nworkers" else "1" for prev, a in zip(["", *args], args, strict=False)]
    return [str(Path(sys.executable).with_name("dask")), *args[1:]]


def listening(process: subprocess.Popen) -> set[str]:
    found = set()
    try:
        procs = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return found
    for proc in procs:
        try:
            found |= {c.laddr.ip for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def workers(address: str, security=None) -> int:
    from distributed import Client

    with Client(address, security=security, timeout="30s") as client:
        return len(client.scheduler_info()["workers"])


def wait_for_workers(address: str, count: int, security=None, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while workers(address, security) < count:
        assert time.monotonic() < deadline, f"no {count} worker(s) at {address}"
        time.sleep(0.5)


def stop(*processes: subprocess.Popen) -> None:
    for proc in processes:
        proc.terminate()
    for proc in processes:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_documented_single_machine_cluster_listens_on_localhost_only():
    scheduler_cmd, worker_cmd = documented("On one machine")
    port, dashboard = str(free_port()), str(free_port())
    subs = {"8786": port, "8787": dashboard}
    scheduler = subprocess.Popen(dask(scheduler_cmd, **subs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        address = f"tcp://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while port not in {str(p) for p in [c.laddr.port for c in psutil.Process(scheduler.pid)
                                             .net_connections(kind="inet")]}:
            assert time.monotonic() < deadline and scheduler.poll() is None
            time.sleep(0.3)
        worker = subprocess.Popen(dask(worker_cmd, **subs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_workers(address, 1)
        addresses = listening(scheduler) | listening(worker)
        assert addresses == {"127.0.0.1"}, addresses
    finally:
        stop(*[p for p in (worker, scheduler) if p])


def make_ca(folder: Path, name: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def write(stem: str, cert, key) -> None:
        (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (folder / f"{stem}-key.pem").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    write(f"{name}-ca", ca, ca_key)

    def leaf(stem: str) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        write(stem, cert, key)

    return leaf


def test_over_tls_a_worker_without_the_courses_certificate_is_refused(tmp_path):
    from distributed.security import Security

    scheduler_cmd, worker_cmd = documented("On several machines")
    ours = make_ca(tmp_path, "course")
    for stem in ("scheduler", "worker", "client"):
        ours(stem)
    make_ca(tmp_path, "rogue")("rogue-worker")  # a certificate, from another CA
    port = str(free_port())
    subs = {"10.0.0.5": "127.0.0.1", "8786": port, "8787": str(free_port()), "ca.pem": str(tmp_path / "course-ca.pem")}
    subs |= {f"{s}{suffix}.pem": str(tmp_path / f"{s}{suffix}.pem") for s in ("scheduler", "worker")
             for suffix in ("", "-key")}
    address = f"tls://127.0.0.1:{port}"
    security = Security(tls_ca_file=str(tmp_path / "course-ca.pem"), tls_client_cert=str(tmp_path / "client.pem"),
                        tls_client_key=str(tmp_path / "client-key.pem"), require_encryption=True)
    scheduler = subprocess.Popen(dask(scheduler_cmd, **subs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    refused = []
    try:
        wait_for_workers(address, 0, security)
        plain = dask(worker_cmd, **subs)
        no_cert = [a for i, a in enumerate(plain) if not a.startswith("--tls") and not plain[i - 1].startswith("--tls")]
        rogue = dask(worker_cmd, **{**subs, str(tmp_path / "worker.pem"): str(tmp_path / "rogue-worker.pem"),
                                    str(tmp_path / "worker-key.pem"): str(tmp_path / "rogue-worker-key.pem")})
        for cmd in (no_cert, rogue):
            proc = subprocess.Popen([*cmd, "--death-timeout", "20"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            refused.append(proc)
        for proc in refused:
            proc.wait(timeout=180)
        assert all(proc.returncode != 0 for proc in refused), [p.stdout.read()[-500:] for p in refused]
        assert workers(address, security) == 0
        good = subprocess.Popen(dask(worker_cmd, **subs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        refused.append(good)
        wait_for_workers(address, 1, security)  # the same command with the course's certificate joins
    finally:
        stop(*[p for p in refused if p.poll() is None], scheduler)
