"""Which API server to talk to, with which credentials, in which namespace.

The config is chosen as client-go chooses it:

1. an explicit ``kubeconfig`` path or ``context`` argument;
2. else ``$KUBECONFIG`` when it is set (an explicit choice: it wins over
   the pod's service account, so a pod can be pointed at another cluster);
3. else the in-cluster config, when running in a pod
   (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the service account's token
   and CA under :data:`SERVICE_ACCOUNT_DIR`);
4. else ``~/.kube/config``.

The default namespace is the kubeconfig context's (else ``default``); with
the in-cluster config it is the pod's own, read from the service account's
``namespace`` file.

Example:
    >>> async def main() -> None:
    ...     conn = await connect(context="kind-kind")
    ...     print(conn.namespace, conn.in_cluster)
    ...     await conn.client.close()
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._credentials import Credentials
from asyncsched.schedulers.kubernetes._env_lookups import skip_unneeded_env_lookups
from asyncsched.schedulers.kubernetes._gate import BACKEND, import_client_off_loop

__all__ = (
    "SERVICE_ACCOUNT_DIR",
    "Connection",
    "connect",
    "context_namespace",
    "load_api_client",
    "load_connection",
    "service_account_namespace",
)

#: where Kubernetes mounts a pod's service account (token, ca.crt, namespace)
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_DEFAULT_KUBECONFIG = "~/.kube/config"


@dataclass
class Connection:
    """A new ``ApiClient``, the :class:`Credentials` keeping it fresh, and
    the namespace to use when none is given."""

    client: Any
    credentials: Credentials
    namespace: str
    in_cluster: bool


async def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    service_account_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
) -> Connection:
    """Load the config (see the module docstring for the order) and connect.

    ``service_account_dir`` and ``environ`` replace :data:`SERVICE_ACCOUNT_DIR`
    and ``os.environ`` (for tests); ``clock`` is what token expiries are
    compared with (see :class:`Credentials`).

    Raises:
        SchedulerUnavailableError: the extra is missing or no config is usable.
    """
    k8s = await import_client_off_loop()
    env = os.environ if environ is None else environ
    sa_dir = SERVICE_ACCOUNT_DIR if service_account_dir is None else service_account_dir
    configuration = k8s.client.Configuration()
    explicit = (
        kubeconfig is not None or context is not None or bool(env.get("KUBECONFIG"))
    )
    if not explicit:
        loaded = await _in_cluster(k8s, configuration, sa_dir, env)
        if loaded is not None:
            loader, namespace = loaded
            # the loader installed its own hook (re-reads the rotated token)
            creds = Credentials(configuration, loader, clock)
            client = k8s.client.ApiClient(configuration=configuration)
            await skip_unneeded_env_lookups(client)
            return Connection(client, creds, namespace, in_cluster=True)
    path = kubeconfig or env.get("KUBECONFIG") or _DEFAULT_KUBECONFIG
    try:
        loader = await k8s.config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (k8s.config.ConfigException, OSError) as exc:
        raise SchedulerUnavailableError(
            BACKEND,
            f"no usable Kubernetes config (not in a cluster; kubeconfig {path!r}"
            f"{f', context {context!r}' if context else ''}): {exc}",
            "set KUBECONFIG or the 'context' option",
        ) from exc
    creds = Credentials(configuration, loader, clock)
    creds.install()
    namespace = await context_namespace(path, context)
    client = k8s.client.ApiClient(configuration=configuration)
    await skip_unneeded_env_lookups(client)
    return Connection(client, creds, namespace, in_cluster=False)


async def load_api_client(
    *, kubeconfig: str | None = None, context: str | None = None
) -> Any:
    """A new ``ApiClient`` from the kubeconfig or the in-cluster config.

    Its credentials refresh themselves before they expire (see
    :func:`load_connection`, which also hands back the refresher).

    Raises:
        SchedulerUnavailableError: the extra is missing or no config is usable.
    """
    client, _ = await load_connection(kubeconfig=kubeconfig, context=context)
    return client


async def load_connection(
    *, kubeconfig: str | None = None, context: str | None = None
) -> tuple[Any, Credentials]:
    """A new ``ApiClient`` and the :class:`Credentials` keeping its token fresh.

    The config is chosen as client-go does (see the module docstring). The
    loader is kept: exec-plugin, OIDC and GCP tokens are renewed before they
    expire and once more on a 401.

    Raises:
        SchedulerUnavailableError: the extra is missing or no config is usable.
    """
    conn = await connect(kubeconfig=kubeconfig, context=context)
    return conn.client, conn.credentials


async def _in_cluster(
    k8s: Any, configuration: Any, sa_dir: Path, env: Mapping[str, str]
) -> tuple[Any, str] | None:
    """The in-cluster loader (config set) and the pod's namespace; None outside a pod."""
    loader = k8s.config.incluster_config.InClusterConfigLoader(
        token_filename=str(sa_dir / "token"),
        cert_filename=str(sa_dir / "ca.crt"),
        environ=dict(env),
    )

    def load() -> str:
        loader.load_and_set(configuration)
        return service_account_namespace(sa_dir)

    try:
        # sync, reads three small files: keep it off the event loop
        namespace = await anyio.to_thread.run_sync(load)
    except k8s.config.ConfigException:
        return None
    return loader, namespace


def service_account_namespace(sa_dir: Path | None = None) -> str:
    """The namespace of the pod's service account (``default`` if unreadable).

    Example:
        >>> service_account_namespace(Path("/nonexistent"))
        'default'
    """
    path = (SERVICE_ACCOUNT_DIR if sa_dir is None else sa_dir) / "namespace"
    try:
        namespace = path.read_text().strip()
    except OSError:
        return "default"
    return namespace or "default"


async def context_namespace(path: str, context: str | None) -> str:
    """The namespace of kubeconfig ``path``'s ``context`` (or current one), else ``default``."""
    k8s = await import_client_off_loop()

    def read() -> str:
        try:
            contexts, active = k8s.config.list_kube_config_contexts(config_file=path)
        except Exception:  # noqa: BLE001 - an unreadable kubeconfig has no namespace
            return "default"
        chosen = active
        for item in contexts or []:
            if context and item.get("name") == context:
                chosen = item
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")

    return await anyio.to_thread.run_sync(read)
