"""A real single-node Kubernetes 1.20 cluster, started and stopped by the tests.

:func:`start_cluster` runs, each as a child process with its own log in a
temp dir: etcd (Debian's), ``kube-apiserver`` (a self-made CA and serving
cert, a token file, RBAC), ``kube-controller-manager`` (Job controller,
garbage collector, namespace deletion), ``kube-scheduler`` (a second profile
named ``volcano`` binds the pods of Volcano jobs as Volcano's scheduler
would), a ``dockerd`` of the node's own (own socket, data and exec roots,
pidfile, bridge, no iptables changes: the daemon on /var/run/docker.sock is
untouched; its containers get Docker's init as PID 1, see
:func:`_start_dockerd`) and a ``kubelet`` (dockershim) on it. The node's images are
imported from Debian's static busybox: the sandbox (``pause``) image and the
tests' :data:`TEST_IMAGE`; nothing is pulled. :meth:`RealCluster.stop` ends
every process by PID, removes the node's containers, bridge, firewall rule
and temp dir.

The binaries come from ``provision.sh`` (built once, cached under
:func:`cache_root`); :func:`missing` says what is not there. Example::

    cluster = start_cluster()
    try:
        ...  # cluster.kubeconfig is an admin kubeconfig
    finally:
        cluster.stop()
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
KUBE_VERSION = "v1.20.2"
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
NODE_NAME = "asyncsched-kube-node"
PAUSE_IMAGE = "asyncsched/pause:1"
#: the image the Kubernetes tests run (tests/kubernetes/helpers.py IMAGE)
TEST_IMAGE = "busybox:1.36"
ADMIN_USER = "asyncsched-admin"
#: a user without any RBAC grant (every request but discovery answers 403)
NOBODY_USER = "asyncsched-nobody"
#: the etcd key :meth:`RealCluster.move_etcd` writes (no API object lives there)
_MOVE_KEY = "/asyncsched-test/moved"
_HOSTS_LINE = f"127.0.0.1 {NODE_NAME}  # asyncsched test node"
_APPLETS = (
    "sh", "cat", "echo", "env", "false", "head", "hostname", "id", "kill", "ls",
    "mkdir", "printf", "rm", "seq", "sleep", "tail", "test", "tr", "true", "wc",
    "yes", "dd",
)  # fmt: skip
VOLCANO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobs.batch.volcano.sh"},
    "spec": {
        "group": "batch.volcano.sh",
        "scope": "Namespaced",
        "names": {
            "plural": "jobs",
            "singular": "job",
            "kind": "Job",
            "listKind": "JobList",
            "shortNames": ["vcjob", "vj"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


class ClusterError(RuntimeError):
    """The cluster could not be started (the message holds the logs' tails)."""


def cache_root() -> Path:
    """Where provision.sh caches builds (``$ASYNCSCHED_CACHE_DIR``)."""
    return Path(os.environ.get("ASYNCSCHED_CACHE_DIR") or "/var/cache/asyncsched")


def build_key() -> str:
    """The cache key provision.sh computes: a hash of the build scripts."""
    digest = hashlib.sha256()
    for name in ("build.sh", "patch_source.py"):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def binary_dir() -> Path:
    """The Kubernetes binaries: ``$ASYNCSCHED_KUBE_BIN_DIR`` or the cached build."""
    explicit = os.environ.get("ASYNCSCHED_KUBE_BIN_DIR")
    if explicit:
        return Path(explicit)
    return cache_root() / f"kube-{KUBE_VERSION}-{build_key()}" / "bin"


def missing() -> list[str]:
    """What the cluster needs and this machine lacks (empty: it can start)."""
    absent = [
        f"{name} (run tests/kubernetes/realcluster/provision.sh as root)"
        for name in BINARIES
        if not os.access(binary_dir() / name, os.X_OK)
    ]
    absent.extend(
        f"{tool} (run tests/kubernetes/realcluster/provision.sh)"
        for tool in ("etcd", "etcdctl", "dockerd", "docker", "openssl", "ip")
        if shutil.which(tool) is None
    )
    if not Path("/bin/busybox").exists():
        absent.append("/bin/busybox (busybox-static)")
    if os.geteuid() != 0:
        absent.append("root (the kubelet and its dockerd run as root)")
    return absent


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _run(*args: str, timeout: float = 60) -> str:
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise ClusterError(f"{' '.join(args)}: {result.stderr.strip()[-2000:]}")
    return result.stdout


def _make_pki(pki: Path) -> None:
    """A CA, the API server's serving cert and the service-account key pair."""
    pki.mkdir()
    ossl = "openssl"
    _run(ossl, "genrsa", "-out", str(pki / "ca.key"), "2048")
    _run(
        ossl, "req", "-x509", "-new", "-nodes", "-key", str(pki / "ca.key"),
        "-subj", "/CN=asyncsched-test-ca", "-days", "30", "-out", str(pki / "ca.crt"),
    )  # fmt: skip
    _run(ossl, "genrsa", "-out", str(pki / "apiserver.key"), "2048")
    _run(
        ossl, "req", "-new", "-key", str(pki / "apiserver.key"),
        "-subj", "/CN=kube-apiserver", "-out", str(pki / "apiserver.csr"),
    )  # fmt: skip
    (pki / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _run(
        ossl, "x509", "-req", "-in", str(pki / "apiserver.csr"),
        "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"), "-CAcreateserial",
        "-days", "30", "-extfile", str(pki / "san.ext"),
        "-out", str(pki / "apiserver.crt"),
    )  # fmt: skip
    _run(ossl, "genrsa", "-out", str(pki / "sa.key"), "2048")
    _run(
        ossl, "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")
    )


def _kubeconfig(
    path: Path, server: str, ca: Path, user: str, token: str, namespace: str = ""
) -> None:
    context = {"cluster": "asyncsched-real", "user": user}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "asyncsched-real",
                "cluster": {"server": server, "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": "asyncsched-real", "context": context},
        ],
        "current-context": "asyncsched-real",
    }
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML


@dataclass
class RealCluster:
    """A running cluster; every process is a child of the test process."""

    root: Path
    bin_dir: Path
    api_url: str
    ca_file: Path
    admin_token: str
    nobody_token: str
    kubeconfig: Path
    nobody_kubeconfig: Path
    docker_host: str
    bridge: str
    #: etcd's client URL (``etcdctl --endpoints``)
    etcd_url: str = ""
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    added_hosts_line: bool = False
    forward_rule: list[str] | None = None
    #: directories outside ``root`` to remove at the end (etcd's, in memory)
    extra_dirs: list[Path] = field(default_factory=list)
    #: the kubelet's fixed paths and their entries before it ran (None: absent)
    fixed_paths: dict[Path, set[str] | None] = field(default_factory=dict)
    _ssl: ssl.SSLContext | None = None

    # -- HTTP (sync: fixture setup and teardown, or in a worker thread) ------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        timeout: float = 10,
    ) -> tuple[int, bytes]:
        """One HTTPS request to the API server; answers (status, body)."""
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.api_url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {token or self.admin_token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        """An admin kubeconfig whose context namespace is ``namespace``."""
        _kubeconfig(
            path, self.api_url, self.ca_file, ADMIN_USER, self.admin_token, namespace
        )
        return path

    def metrics(self) -> str:
        """The API server's ``/metrics`` text (Prometheus format)."""
        status, body = self.request("GET", "/metrics", timeout=30)
        if status != 200:
            raise ClusterError(f"GET /metrics: {status}")
        return body.decode()

    def _wait(self, what: str, check: Any, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                if check():
                    return
            except (OSError, ValueError):
                pass
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(
                        f"{name} exited ({proc.returncode}) while waiting"
                        f" for {what}\n{self.log_tails()}"
                    )
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {what}\n{self.log_tails()}")
            time.sleep(0.1)

    def _api_ready(self) -> bool:
        return self.request("GET", "/readyz", timeout=3)[0] == 200

    def node_ready(self) -> bool:
        """Whether the node reports the Ready condition True."""
        status, body = self.request("GET", f"/api/v1/nodes/{NODE_NAME}", timeout=3)
        if status != 200:
            return False
        conditions = json.loads(body).get("status", {}).get("conditions") or []
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
        )

    # -- processes -----------------------------------------------------------
    def _start(self, name: str, argv: list[str]) -> None:
        self.commands[name] = argv
        log = (self.root / "logs" / f"{name}.log").open("ab")
        try:
            self.procs[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # no terminal signal reaches it
            )
        finally:
            log.close()

    def log_tails(self, chars: int = 1500) -> str:
        """The end of every component's log."""
        parts = []
        for log in sorted((self.root / "logs").glob("*.log")):
            text = log.read_text(errors="replace")[-chars:]
            parts.append(f"--- {log.name}\n{text}")
        return "\n".join(parts)

    def restart_apiserver(
        self,
        down_s: float = 0.0,
        ready_s: float = 60,
        stop_grace: float = 3.0,
        *,
        etcd_moves: bool = False,
    ) -> None:
        """Stop kube-apiserver (SIGTERM, by PID), wait ``down_s``, start it again.

        On SIGTERM the server ends its watches and closes its port at once,
        then lingers (20 s and more measured here): after ``stop_grace``
        seconds it is killed. etcd keeps the data; the new server has a fresh
        watch cache, which starts at etcd's revision when it lists. Only API
        servers write to etcd, so with this single one down the revision
        stays put: a version that was etcd's newest at the stop is still
        served by the new cache. ``etcd_moves`` writes to etcd while the
        server is down (:meth:`move_etcd`, as the other API servers of a
        highly available control plane would), so that every version a
        client holds is older than the new cache (a watch from it answers
        410). Blocks until ``/readyz`` answers (at most ``ready_s`` seconds: a
        loaded machine needs more than 60): from async code run it in a
        worker thread.
        """
        _terminate(self.procs.pop("kube-apiserver"), stop_grace)
        if etcd_moves:
            self.move_etcd()
        time.sleep(down_s)
        self._start("kube-apiserver", self.commands["kube-apiserver"])
        self._wait("kube-apiserver /readyz", self._api_ready, ready_s)

    def etcd_revision(self) -> int:
        """etcd's current revision (the newest resourceVersion of any object)."""
        out = _run(
            "etcdctl", "--endpoints", self.etcd_url, "endpoint", "status", "-w", "json"
        )
        return int(json.loads(out)[0]["Status"]["header"]["revision"])

    def move_etcd(self) -> int:
        """Write a key of the tests' own, outside the API server's
        ``/registry`` prefix: etcd's revision moves on without any object
        changing. Answers the new revision. Blocks: from async code run it in
        a worker thread."""
        _run("etcdctl", "--endpoints", self.etcd_url, "put", _MOVE_KEY, "moved")
        return self.etcd_revision()

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, at once (the API server's
        ``--etcd-compaction-interval`` does it every 60 s): every older
        resourceVersion is gone from etcd, an exact list of one answers 410.
        Answers that revision. Blocks: from async code run it in a worker thread.
        """
        revision = self.etcd_revision()
        _run("etcdctl", "--endpoints", self.etcd_url, "compact", str(revision))
        return revision

    def docker(self, *args: str, check: bool = True) -> str:
        """Run the docker CLI against the node's own dockerd."""
        result = subprocess.run(
            ["docker", "-H", self.docker_host, *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise ClusterError(f"docker {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def stop(self) -> None:
        """Stop everything by PID; remove the node's containers and the temp dir."""
        kubelet = self.procs.pop("kubelet", None)
        if kubelet is not None:
            _terminate(kubelet)
        dockerd = self.procs.pop("dockerd", None)
        if dockerd is not None:
            if dockerd.poll() is None:
                ids = self.docker("ps", "-aq", check=False).split()
                if ids:
                    self.docker("rm", "-f", "-v", *ids, check=False)
            _terminate(dockerd)
        for name in reversed(list(self.procs)):
            # the API server lingers 20 s and more after SIGTERM (see
            # restart_apiserver); its data is thrown away with the root
            grace = _APISERVER_STOP_GRACE if name == "kube-apiserver" else 20
            _terminate(self.procs.pop(name), grace)
        _kill_strays(self.root)
        _unmount_below(self.root)
        if self.forward_rule is not None:
            subprocess.run(
                ["iptables", "-D", *self.forward_rule], capture_output=True, check=False
            )
            self.forward_rule = None
        subprocess.run(
            ["ip", "link", "delete", self.bridge], capture_output=True, check=False
        )
        if self.added_hosts_line:
            _remove_hosts_line()
            self.added_hosts_line = False
        _restore_fixed_paths(self.fixed_paths)
        shutil.rmtree(self.root, ignore_errors=True)
        for extra in self.extra_dirs:
            shutil.rmtree(extra, ignore_errors=True)


#: seconds a stopped cluster's API server gets after SIGTERM before SIGKILL
_APISERVER_STOP_GRACE = 3.0


def _terminate(proc: subprocess.Popen[bytes], grace: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _kill_strays(root: Path) -> None:
    """Container shims or a containerd naming our temp dir outlive a dockerd
    only when it crashed: end them by PID."""
    needle = str(root).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def _unmount_below(root: Path) -> None:
    """The kubelet and dockerd mount below their roots (volumes, overlays)."""
    prefix = str(root) + "/"
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)


#: where kubelet 1.20 writes whatever its --root-dir says: pod logs (and
#: their links) and the device-plugin socket
KUBELET_FIXED_PATHS = (
    Path("/var/log/pods"),
    Path("/var/log/containers"),
    Path("/var/lib/kubelet"),
)


def _snapshot_fixed_paths() -> dict[Path, set[str] | None]:
    return {
        path: ({e.name for e in path.iterdir()} if path.is_dir() else None)
        for path in KUBELET_FIXED_PATHS
    }


def _restore_fixed_paths(before: dict[Path, set[str] | None]) -> None:
    """Remove what the kubelet added to its fixed paths (or the paths it made)."""
    for path, entries in before.items():
        if entries is None:
            shutil.rmtree(path, ignore_errors=True)
            continue
        if not path.is_dir():
            continue
        for entry in path.iterdir():
            if entry.name in entries:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    before.clear()


def _ensure_hosts_line() -> bool:
    """Map the node's name to 127.0.0.1; True when this call added the line."""
    hosts = Path("/etc/hosts")
    text = hosts.read_text()
    if any(line.split()[:2] == ["127.0.0.1", NODE_NAME] for line in text.splitlines()):
        return False
    with hosts.open("a") as f:
        f.write(("" if text.endswith("\n") or not text else "\n") + _HOSTS_LINE + "\n")
    return True


def _remove_hosts_line() -> None:
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines(keepends=True)
    kept = [line for line in lines if line.rstrip("\n") != _HOSTS_LINE]
    if kept != lines:
        # /etc/hosts may be a bind mount: rewrite in place, never replace it
        with hosts.open("w") as f:
            f.writelines(kept)


def _rootfs_tar(work: Path) -> Path:
    """A tar of a minimal root filesystem: static busybox and applet links."""
    root = work / "rootfs"
    (root / "bin").mkdir(parents=True)
    for d in ("tmp", "etc", "proc", "sys", "dev"):
        (root / d).mkdir()
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in _APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    tar = work / "rootfs.tar"
    _run("tar", "-C", str(root), "-cf", str(tar), ".")
    shutil.rmtree(root)
    return tar


def start_cluster(*, ready_deadline: float = 90) -> RealCluster:
    """Start the whole cluster and wait for the node Ready (see module doc)."""
    bins = binary_dir()
    # short: dockerd's exec root holds unix sockets (108-byte path limit)
    root = Path(tempfile.mkdtemp(prefix="askube-", dir="/tmp"))
    (root / "logs").mkdir()
    etcd_port, peer_port, api_port, kubelet_port, sched_port = _free_ports(5)
    bridge = f"askube{os.getpid() % 100000}"
    cluster = RealCluster(
        root=root,
        bin_dir=bins,
        api_url=f"https://127.0.0.1:{api_port}",
        ca_file=root / "pki" / "ca.crt",
        admin_token=os.urandom(16).hex(),
        nobody_token=os.urandom(16).hex(),
        kubeconfig=root / "kubeconfig",
        nobody_kubeconfig=root / "nobody.kubeconfig",
        docker_host=f"unix://{root}/docker.sock",
        bridge=bridge,
    )
    try:
        _start_all(cluster, etcd_port, peer_port, api_port, kubelet_port, sched_port)
        cluster._wait(f"node {NODE_NAME} Ready", cluster.node_ready, ready_deadline)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_all(
    c: RealCluster,
    etcd_port: int,
    peer_port: int,
    api_port: int,
    kubelet_port: int,
    sched_port: int,
) -> None:
    root, bins = c.root, c.bin_dir
    pki = root / "pki"
    _make_pki(pki)
    (root / "tokens.csv").write_text(
        f'{c.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
        f"{c.nobody_token},{NOBODY_USER},{NOBODY_USER}\n"
    )
    _kubeconfig(c.kubeconfig, c.api_url, c.ca_file, ADMIN_USER, c.admin_token)
    _kubeconfig(c.nobody_kubeconfig, c.api_url, c.ca_file, NOBODY_USER, c.nobody_token)
    c.added_hosts_line = _ensure_hosts_line()
    c.fixed_paths = _snapshot_fixed_paths()

    # etcd's data in memory when /dev/shm is there: no fsync cost
    shm = Path("/dev/shm")
    etcd_dir = root / "etcd"
    if shm.is_dir() and os.access(shm, os.W_OK):
        etcd_data = Path(tempfile.mkdtemp(prefix="askube-etcd-", dir=shm))
        c.extra_dirs.append(etcd_data)
        etcd_dir.symlink_to(etcd_data)
    peer = f"http://127.0.0.1:{peer_port}"
    etcd_url = c.etcd_url = f"http://127.0.0.1:{etcd_port}"
    c._start(
        "etcd",
        [
            "etcd", "--name", "asyncsched", "--data-dir", str(etcd_dir / "data"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"asyncsched={peer}", "--log-level", "warn",
        ],
    )  # fmt: skip
    c._start(
        "kube-apiserver",
        [
            str(bins / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            "--insecure-port=0",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={root / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--kubelet-preferred-address-types=Hostname,InternalIP",
            "--etcd-compaction-interval=60s",
            "--v=1",
        ],
    )
    c._wait("kube-apiserver /readyz", c._api_ready, 60)
    status, body = c.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", VOLCANO_CRD
    )
    if status not in (200, 201):
        raise ClusterError(f"creating the Volcano CRD: {status} {body[:500]!r}")

    mgr_kubeconfig = str(c.kubeconfig)
    c._start(
        "kube-controller-manager",
        [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={mgr_kubeconfig}",
            "--controllers=*",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--allocate-node-cidrs=false",
            "--leader-elect=false",
            "--port=0",
            "--secure-port=0",
            "--v=1",
        ],
    )
    sched_conf = root / "scheduler.yaml"
    sched_conf.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": mgr_kubeconfig},
                "leaderElection": {"leaderElect": False},
                "healthzBindAddress": f"127.0.0.1:{sched_port}",
                "metricsBindAddress": f"127.0.0.1:{sched_port}",
                # Volcano's pods name scheduler "volcano": a second profile
                # binds them here, as Volcano's scheduler would
                "profiles": [
                    {"schedulerName": "default-scheduler"},
                    {"schedulerName": "volcano"},
                ],
            }
        )
    )
    c._start(
        "kube-scheduler",
        [
            str(bins / "kube-scheduler"),
            f"--config={sched_conf}",
            "--secure-port=0",
            "--v=1",
        ],
    )

    _start_dockerd(c)
    _import_images(c)
    kubelet_dir = root / "kubelet"
    kubelet_dir.mkdir()
    c._start(
        "kubelet",
        [
            str(bins / "kubelet"),
            f"--kubeconfig={c.kubeconfig}",
            f"--hostname-override={NODE_NAME}",
            f"--root-dir={kubelet_dir}",
            f"--cert-dir={kubelet_dir / 'pki'}",
            f"--seccomp-profile-root={kubelet_dir / 'seccomp'}",
            f"--experimental-dockershim-root-directory={root / 'dockershim'}",
            "--container-runtime=docker",
            f"--docker-endpoint={c.docker_host}",
            f"--pod-infra-container-image={PAUSE_IMAGE}",
            "--cgroup-driver=cgroupfs",
            "--cgroups-per-qos=false",
            "--enforce-node-allocatable=",
            "--fail-swap-on=false",
            "--eviction-hard=",
            "--image-gc-high-threshold=100",
            "--image-gc-low-threshold=99",
            "--authorization-mode=AlwaysAllow",
            "--authentication-token-webhook=false",
            "--address=127.0.0.1",
            f"--port={kubelet_port}",
            "--read-only-port=0",
            "--healthz-port=0",
            "--node-status-update-frequency=4s",
            "--serialize-image-pulls=false",
            "--v=1",
        ],
    )


def _start_dockerd(c: RealCluster) -> None:
    """The node's own dockerd: own socket, roots, pidfile and bridge; no iptables.

    ``--init``: each container's PID 1 is Docker's init (tini), which passes
    SIGTERM on to the command. Without it a pod's shell is PID 1 and ignores
    SIGTERM, so every cancelled or fail-fast-stopped test pod would live out
    its 30 s grace before the kubelet's SIGKILL (a test cancelling a ``sleep``
    took 45-50 s); with it, it ends at once with 143. A trap the command sets
    still runs (the shell gets the SIGTERM); the kubelet's deletion is still
    graceful (deletionTimestamp, SIGTERM, then SIGKILL after the grace).
    """
    subnet_octet = os.getpid() % 200 + 20
    address = f"10.213.{subnet_octet}.1/24"
    subprocess.run(["ip", "link", "delete", c.bridge], capture_output=True, check=False)
    _run("ip", "link", "add", "name", c.bridge, "type", "bridge")
    _run("ip", "addr", "add", address, "dev", c.bridge)
    _run("ip", "link", "set", c.bridge, "up")
    # another dockerd may set the FORWARD policy to DROP: let pods talk
    rule = ["FORWARD", "-i", c.bridge, "-o", c.bridge, "-j", "ACCEPT"]
    if shutil.which("iptables") is not None:
        added = subprocess.run(
            ["iptables", "-I", *rule], capture_output=True, check=False
        )
        if added.returncode == 0:
            c.forward_rule = rule
    root = c.root
    c._start(
        "dockerd",
        [
            "dockerd",
            "--host", c.docker_host,
            "--data-root", str(root / "docker"),
            "--exec-root", str(root / "dexec"),
            "--pidfile", str(root / "dockerd.pid"),
            "--bridge", c.bridge,
            "--iptables=false",
            "--ip-masq=false",
            "--ipv6=false",
            "--userland-proxy=false",
            "--exec-opt", "native.cgroupdriver=cgroupfs",
            "--init",
            "--log-level", "warn",
        ],
    )  # fmt: skip

    def answers() -> bool:
        return (
            subprocess.run(
                ["docker", "-H", c.docker_host, "version"],
                capture_output=True,
                timeout=10,
                check=False,
            ).returncode
            == 0
        )

    c._wait("the node's dockerd", answers, 60)


def _import_images(c: RealCluster) -> None:
    tar = _rootfs_tar(c.root)
    c.docker(
        "import", "--change", 'ENTRYPOINT ["/bin/sleep", "2147483647"]',
        str(tar), PAUSE_IMAGE,
    )  # fmt: skip
    c.docker("import", "--change", "ENV PATH=/bin", str(tar), TEST_IMAGE)
    # the fixture controller's own tests name plain "busybox"
    c.docker("tag", TEST_IMAGE, "busybox:latest")
    tar.unlink()
