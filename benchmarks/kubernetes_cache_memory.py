"""Memory of the Kubernetes caches at 1,000 and 10,000 finished apps.

A fake API server (the test suite's, in a subprocess) holds N Volcano Jobs
and their N pods, each as large as on a real cluster: the pod spec a Volcano
Job's pod gets after admission (defaults, the service-account volume), a
full status, and ``managedFields`` for the client's and the controller's
writes (measured sizes are printed). A client process then starts the caches
(``KubernetesScheduler.list()``) and reports what they hold:

* ``full``: the caches as they were (whole objects, one unpaginated list);
* ``slim``: what they are now (only the fields status reads, lists of 500).

Each figure comes from a fresh client process, connected before measuring:
Python heap growth from starting the caches (``tracemalloc``: retained once
listed, and the peak while listing), and the process RSS at the end.

Run: ``python benchmarks/kubernetes_cache_memory.py`` (``--sizes 1000,10000``).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NS = "bench"
JSON = dict[str, Any]


# -- the server side ------------------------------------------------------------


def _objects(i: int) -> tuple[JSON, JSON, JSON]:
    """Job manifest, its status, and its pod (with status) of app ``i``."""
    from asyncsched.schedulers.kubernetes._render import render_job
    from asyncsched.specs import AppDef, Resource, Role

    role = Role(
        "trainer",
        image="registry.example.com/team/trainer:2024.11.3",
        entrypoint="python",
        args=["-m", "train", "--epochs", "10", "--data", "/data/set"],
        env={"LOG_LEVEL": "info", "WANDB_PROJECT": "bench", "SEED": str(i)},
        resource=Resource(cpu=2, gpu=0, memMB=4096),
        port_map={"http": 8080},
    )
    job = render_job(
        AppDef(f"bench{i}", roles=[role]),
        {"namespace": NS, "queue": "default"},
        name=f"bench{i}-x{i:06d}",
        session="bench",
        version="0.0.0",
    ).manifests[0]
    status = {
        "state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:09Z"},
        "minAvailable": 1,
        "succeeded": 1,
        "version": 1,
        "taskStatusCount": {"trainer-0": {"phase": {"Succeeded": 1}}},
        "conditions": [
            {"status": s, "lastTransitionTime": f"2026-01-01T00:00:0{n}Z"}
            for n, s in enumerate(("Pending", "Running", "Completed"))
        ],
    }
    task = job["spec"]["tasks"][0]
    template = copy.deepcopy(task["template"])
    pod_name = f"{job['metadata']['name']}-trainer-0-0"
    spec = template["spec"]
    spec.update(
        {
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "nodeName": f"node-{i % 50:03d}.cluster.internal",
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "schedulerName": "volcano",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "hostname": pod_name,
            "subdomain": job["metadata"]["name"],
            "tolerations": [
                {
                    "effect": "NoExecute",
                    "key": f"node.kubernetes.io/{what}",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                }
                for what in ("not-ready", "unreachable")
            ],
        }
    )
    token = f"kube-api-access-{i % 100000:05d}"
    spec.setdefault("volumes", []).append(
        {
            "name": token,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {
                        "serviceAccountToken": {
                            "expirationSeconds": 3607,
                            "path": "token",
                        }
                    },
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "fieldRef": {
                                        "apiVersion": "v1",
                                        "fieldPath": "metadata.namespace",
                                    },
                                    "path": "namespace",
                                }
                            ]
                        }
                    },
                ],
            },
        }
    )
    for c in spec["containers"]:
        c.setdefault("volumeMounts", []).append(
            {
                "name": token,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        )
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
    meta = template["metadata"]
    meta["name"] = pod_name
    meta.setdefault("annotations", {}).update(
        {
            "scheduling.k8s.io/group-name": job["metadata"]["name"],
            "volcano.sh/job-name": job["metadata"]["name"],
            "volcano.sh/job-version": "1",
            "volcano.sh/queue-name": "default",
            "volcano.sh/task-spec": "trainer-0",
            "volcano.sh/template-uid": f"{job['metadata']['name']}-trainer-0",
        }
    )
    meta["ownerReferences"] = [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": "Succeeded",
            "hostIP": "192.168.0.10",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "qosClass": "Burstable",
            "startTime": "2026-01-01T00:00:01Z",
            "conditions": [
                {
                    "type": t,
                    "status": "True" if t != "Ready" else "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-01-01T00:00:02Z",
                    **({"reason": "PodCompleted"} if t != "PodScheduled" else {}),
                }
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "docker-pullable://registry.example.com/team/"
                    "trainer@sha256:" + "ab" * 32,
                    "containerID": "docker://" + f"{i:064x}",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "lastState": {},
                    "state": {
                        "terminated": {
                            "containerID": "docker://" + f"{i:064x}",
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": "2026-01-01T00:00:03Z",
                            "finishedAt": "2026-01-01T00:00:08Z",
                        }
                    },
                }
                for c in spec["containers"]
            ],
        },
    }
    return job, status, pod


async def serve(n: int, workdir: Path) -> None:
    """Serve ``n`` apps until stdin closes; print the kubeconfig path first."""
    from tests.kubernetes.fakeapi import FakeKubeServer
    from tests.kubernetes.fakeapi.kinds import KINDS

    vjobs = KINDS[("batch.volcano.sh", "v1alpha1", "jobs")]
    pods = KINDS[("", "v1", "pods")]
    async with FakeKubeServer(bookmark_interval=60.0) as server:
        server.create_namespace(NS)
        store = server.store
        store.history_limit = 10  # keep no history of the set-up writes
        sizes: dict[str, int] = {}
        for i in range(n):
            job, status, pod = _objects(i)
            created = store.create(vjobs, NS, job)
            store.update(vjobs, NS, {**created, "status": status})
            pod_status = pod.pop("status")
            created = store.create(pods, NS, pod)
            stored = store.update(pods, NS, {**created, "status": pod_status})
            if i == 0:
                sizes["job"] = len(
                    json.dumps(store.get(vjobs, NS, job["metadata"]["name"]))
                )
                sizes["pod"] = len(json.dumps(stored))
                sizes["pod managedFields"] = len(
                    json.dumps(stored["metadata"]["managedFields"])
                )
        path = server.write_kubeconfig(workdir / "kubeconfig", namespace=NS)
        print(json.dumps({"kubeconfig": str(path), "sizes": sizes}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# -- the client side ------------------------------------------------------------


async def measure(kubeconfig: str, mode: str, trace: bool) -> JSON:
    import psutil

    from asyncsched.schedulers.kubernetes import _caches
    from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

    page_size = 500
    if mode == "full":  # as before: whole objects, one unpaginated list
        setattr(_caches, "slim", lambda obj: obj)  # noqa: B010 -- patch a global
        page_size = 0
    proc = psutil.Process()
    async with KubernetesScheduler(
        "bench", kubeconfig=kubeconfig, namespace=NS, list_page_size=page_size
    ) as sched:
        await sched.describe(f"{NS}:warm-up")  # the client loaded and connected
        gc.collect()
        rss0 = proc.memory_info().rss
        if trace:
            tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        apps = len(await sched.list())
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = proc.memory_info().rss
    return {
        "apps": apps,
        "retained_mib": (current - base) / 2**20,
        "peak_mib": (peak - base) / 2**20,
        "rss_growth_mib": (rss - rss0) / 2**20,
        "rss_mib": rss / 2**20,
    }


def run_client(kubeconfig: str, mode: str, *, trace: bool) -> JSON:
    flags = ["--trace"] if trace else []
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--client",
            mode,
            "--kubeconfig",
            kubeconfig,
            *flags,
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result: JSON = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "| apps (jobs + pods) | cache | heap retained MiB | heap peak MiB"
        " | RSS growth MiB | RSS MiB |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(n), "--dir", tmp],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            try:
                assert server.stdout is not None
                ready = json.loads(server.stdout.readline())
                if n == sizes[0]:
                    print(f"(object sizes as served, bytes of JSON: {ready['sizes']})")
                for mode in ("full", "slim"):
                    r = run_client(ready["kubeconfig"], mode, trace=True)
                    # RSS without tracemalloc (which costs memory of its own)
                    m = run_client(ready["kubeconfig"], mode, trace=False)
                    assert r["apps"] == m["apps"] == n, (r, m)
                    print(
                        f"| {n:,} + {n:,} | {mode} | {r['retained_mib']:.1f}"
                        f" | {r['peak_mib']:.1f} | {m['rss_growth_mib']:.0f}"
                        f" | {m['rss_mib']:.0f} |",
                        flush=True,
                    )
            finally:
                assert server.stdin is not None
                server.stdin.close()
                server.wait(timeout=60)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.serve is not None:
        asyncio.run(serve(ARGS.serve, Path(ARGS.dir)))
    elif ARGS.client:
        print(
            json.dumps(asyncio.run(measure(ARGS.kubeconfig, ARGS.client, ARGS.trace)))
        )
    else:
        main(ARGS)
