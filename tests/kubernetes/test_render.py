"""AppDef -> Kubernetes manifests, without a server.

Golden files in ``golden/`` hold the whole dry-run YAML of three apps; set
``ASYNCSCHED_UPDATE_GOLDEN=1`` to rewrite them after an intended change (and
review the diff).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.kubernetes._job_names import (
    MAX_NAME,
    job_name,
    normalize_str,
    sanitize_label_value,
    shorten,
)
from asyncsched.schedulers.kubernetes._render import (
    format_job,
    render_job,
)
from asyncsched.specs import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
)

GOLDEN = Path(__file__).parent / "golden"
VERSION = "0.0.0-test"


def render(app: AppDef, name: str = "app-name-42", **cfg: CfgVal) -> Any:
    cfg.setdefault("queue", "testqueue")
    return render_job(app, cfg, name=name, session="sess", version=VERSION)


def torchx_test_role(**kwargs: Any) -> Role:
    """The role of TorchX's own Kubernetes test."""
    values: dict[str, Any] = {
        "name": "trainer_foo",
        "image": "pytorch/torchx:latest",
        "entrypoint": "main",
        "args": [
            "--output-path",
            "${img_root}",
            "--app-id",
            "${app_id}",
            "--rank0-env",
            "${rank0_env}",
        ],
        "env": {"FOO": "bar", "FOO_FIELD_PATH": "[FIELD_PATH]bar"},
        "resource": Resource(cpu=2, memMB=3000, gpu=4),
        "port_map": {"foo": 1234},
        "max_retries": 3,
        "mounts": [BindMount(src_path="/src", dst_path="/dst", read_only=True)],
    }
    values.update(kwargs)
    return Role(**values)


def multi_role_app() -> AppDef:
    """A trainer plus a parameter-server role: the multi-role layout."""
    trainer = Role(
        name="trainer",
        image="ghcr.io/example/trainer:1",
        entrypoint="python",
        args=["-m", "train", "--rank0", "$${rank0_env}", "--env", "${rank0_env}"],
        num_replicas=2,
        min_replicas=1,
        max_retries=2,
        port_map={"c10d": 29500},
        env={"LOG": "1", "NODE": "[FIELD_PATH]spec.nodeName"},
        resource=Resource(
            cpu=4,
            gpu=2,
            memMB=16000,
            capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
            devices={"vpc.amazonaws.com/efa": 4},
        ),
        mounts=[VolumeMount(src="data", dst_path="/data")],
    )
    ps = Role(
        name="ps",
        image="ghcr.io/example/ps:1",
        entrypoint="ps-server",
        args=["--replica", "${replica_id}", "--peer", "${rank0_env}"],
        resource=Resource(cpu=1, gpu=0, memMB=2048),
    )
    return AppDef("Trainer_App", roles=[trainer, ps])


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ASYNCSCHED_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from the golden file"


def task(job: Any, i: int = 0) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = job.manifests[0]["spec"]["tasks"]
    return tasks[i]


def container(job: Any, i: int = 0) -> dict[str, Any]:
    spec = task(job, i)["template"]["spec"]
    c: dict[str, Any] = spec["containers"][0]
    return c


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


# -- golden manifests ----------------------------------------------------------


def test_torchx_test_app_golden_volcano_job() -> None:
    job = render(AppDef("test", roles=[torchx_test_role()]))
    check_golden("torchx_test_app.yaml", format_job(job))


def test_multi_role_golden_volcano_job() -> None:
    job = render(
        multi_role_app(),
        name="trainerapp-bq4fz7dkm2pwhs",
        queue="default",
        priority_class="high",
        service_account="trainer-sa",
    )
    check_golden("multi_role_volcano.yaml", format_job(job))


def indexed_multi_role_app() -> AppDef:
    """The multi-role app without ``min_replicas`` (Indexed Jobs refuse it)."""
    app = multi_role_app()
    app.roles[0].min_replicas = None
    return app


def test_multi_role_golden_indexed_jobs() -> None:
    job = render(
        indexed_multi_role_app(),
        name="trainerapp-bq4fz7dkm2pwhs",
        job_api="indexed",
        priority_class="high",
        service_account="trainer-sa",
    )
    check_golden("multi_role_indexed.yaml", format_job(job))


def test_dryrun_yaml_is_loadable_as_kubernetes_documents() -> None:
    job = render(indexed_multi_role_app(), job_api="indexed")
    docs = list(yaml.safe_load_all(format_job(job)))
    assert [d["kind"] for d in docs] == ["Service", "Job", "Job"]
    assert docs == job.manifests


# -- TorchX's layout --------------------------------------------


def test_dryrun_yaml_writes_each_replicas_pod_out_in_full() -> None:
    # replicas of one role share their mounts and volumes: the YAML repeats
    # them in each task instead of pointing back with anchors (&id001/*id001)
    app = multi_role_app()
    job = render(app, queue="default")
    text = format_job(job)
    assert "&id" not in text
    assert "*id" not in text
    first, second = (task(job, i)["template"]["spec"] for i in (0, 1))
    assert first["volumes"] == second["volumes"]
    assert first["volumes"] is not second["volumes"]


def test_task_command_has_macros_substituted() -> None:
    job = render(AppDef("test", roles=[torchx_test_role()]))
    assert container(job)["command"] == [
        "main",
        "--output-path",
        "",
        "--app-id",
        "app-name-42",
        "--rank0-env",
        "TORCHX_RANK0_HOST",
    ]


def test_application_retry_policy_restarts_the_job() -> None:
    t = task(render(AppDef("test", roles=[torchx_test_role()])))
    assert t["maxRetry"] == 3
    assert t["policies"] == [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]


def test_zero_retries_has_no_policies_nor_max_retry() -> None:
    job = render(AppDef("test", roles=[torchx_test_role(max_retries=0)]))
    assert "policies" not in task(job)
    assert "maxRetry" not in task(job)
    # Volcano's admission would turn a job-level 0 into 3: left out instead
    assert "maxRetry" not in job.manifests[0]["spec"]


def test_replica_retry_policy_restarts_the_task_and_role_policy_is_rejected() -> None:
    job = render(
        AppDef("t", roles=[torchx_test_role(retry_policy=RetryPolicy.REPLICA)])
    )
    assert task(job)["policies"] == [
        {"event": "PodEvicted", "action": "RestartTask"},
        {"event": "PodFailed", "action": "RestartTask"},
    ]
    with pytest.raises(SpecError) as info:
        render(AppDef("t", roles=[torchx_test_role(retry_policy=RetryPolicy.ROLE)]))
    assert info.value.field == "roles[0].retry_policy"


def test_resources_limits_requests_with_reserve() -> None:
    resources = container(render(AppDef("test", roles=[torchx_test_role()])))[
        "resources"
    ]
    assert resources["limits"] == {
        "cpu": "2000m",
        "memory": "3000M",
        "nvidia.com/gpu": "4",
    }
    assert resources["requests"] == {
        "cpu": "1900m",
        "memory": "1976M",
        "nvidia.com/gpu": "4",
    }


def test_reserve_is_configurable_and_null_resource_has_no_limits() -> None:
    job = render(
        AppDef("test", roles=[torchx_test_role()]),
        reserved_millicpu=0,
        reserved_memmb=0,
    )
    assert container(job)["resources"]["requests"]["cpu"] == "2000m"
    assert container(job)["resources"]["requests"]["memory"] == "3000M"
    bare = Role("r", image="busybox", entrypoint="true")
    assert container(render(AppDef("a", roles=[bare])))["resources"] == {
        "limits": {},
        "requests": {},
    }


def test_field_path_prefix_is_removed_only_as_a_prefix() -> None:
    role = torchx_test_role(env={"IP": "[FIELD_PATH]status.podIP", "X": "plain"})
    env = env_of(container(render(AppDef("test", roles=[role]))))
    # TorchX's str.strip turned this into "status.pod"
    assert env["IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["X"] == "plain"


def test_ports_security_context_and_container_name() -> None:
    c = container(render(AppDef("test", roles=[torchx_test_role()])))
    assert c["ports"] == [{"name": "foo", "containerPort": 1234}]
    assert c["securityContext"] == {}
    assert c["name"] == "trainerfoo-0"


def test_invalid_port_name_is_rejected_before_launch() -> None:
    role = torchx_test_role(port_map={"tcp_store": 29500})
    with pytest.raises(SpecError, match="tcp_store") as info:
        render(AppDef("test", roles=[role]))
    assert info.value.field == "roles[0].port_map"


def test_shm_and_bind_mounts() -> None:
    spec = task(render(AppDef("test", roles=[torchx_test_role()])))["template"]["spec"]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "mount-0", "mountPath": "/dst", "readOnly": True},
    ]
    assert spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "mount-0", "hostPath": {"path": "/src"}},
    ]


def test_pod_spec_defaults_and_service_account() -> None:
    app = AppDef("test", roles=[torchx_test_role()])
    template = task(render(app, service_account="srvacc"))["template"]
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["spec"]["serviceAccountName"] == "srvacc"
    assert template["spec"]["nodeSelector"] == {}
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert "serviceAccountName" not in task(render(app))["template"]["spec"]


def test_volume_mount_is_a_pvc() -> None:
    role = torchx_test_role(
        mounts=[VolumeMount(src="name", dst_path="/dst", read_only=True)]
    )
    spec = task(render(AppDef("test", roles=[role])))["template"]["spec"]
    assert spec["volumes"][1] == {
        "name": "mount-0",
        "persistentVolumeClaim": {"claimName": "name"},
    }
    assert spec["containers"][0]["volumeMounts"][1] == {
        "name": "mount-0",
        "mountPath": "/dst",
        "readOnly": True,
    }


def test_device_mounts_are_host_paths_in_a_privileged_container() -> None:
    role = torchx_test_role(
        mounts=[
            DeviceMount(src_path="/dev/foo", dst_path="/dev/bar", permissions="rwm"),
            DeviceMount(src_path="/dev/foo2", dst_path="/dev/bar2", permissions="r"),
        ]
    )
    c = container(render(AppDef("test", roles=[role])))
    assert [m.get("readOnly") for m in c["volumeMounts"][1:]] == [False, True]
    assert c["securityContext"] == {"privileged": True}


def test_resource_devices_are_limits_only_and_not_privileged() -> None:
    role = torchx_test_role(
        resource=Resource(
            cpu=1, gpu=0, memMB=1000, devices={"vpc.amazonaws.com/efa": 4}
        )
    )
    c = container(render(AppDef("test", roles=[role])))
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "4"
    assert "vpc.amazonaws.com/efa" not in c["resources"]["requests"]
    assert c["securityContext"] == {}
    removed = container(render(AppDef("test", roles=[role]), efa_device_count=0))
    assert "vpc.amazonaws.com/efa" not in removed["resources"]["limits"]


def test_instance_type_and_node_selector_option() -> None:
    role = torchx_test_role(
        resource=Resource(
            cpu=1,
            gpu=0,
            memMB=1000,
            capabilities={"node.kubernetes.io/instance-type": "some_instance"},
        )
    )
    job = render(AppDef("test", roles=[role]), node_selector={"zone": "a"})
    assert task(job)["template"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "some_instance",
        "zone": "a",
    }


def test_rank0_env_for_every_replica() -> None:
    job = render(AppDef("test", roles=[torchx_test_role(num_replicas=2)]))
    assert container(job, 0)["command"][-1] == "TORCHX_RANK0_HOST"
    assert env_of(container(job, 0))["TORCHX_RANK0_HOST"] == "localhost"
    assert container(job, 1)["command"][-1] == "VC_TRAINERFOO_0_HOSTS"
    assert "TORCHX_RANK0_HOST" not in env_of(container(job, 1))


def test_rank0_env_name_of_a_dashed_role_is_what_volcano_defines() -> None:
    role = torchx_test_role(name="my-role", num_replicas=2)
    job = render(AppDef("test", roles=[role]))
    # TorchX wrote VC_MY-ROLE_0_HOSTS, which Volcano never sets
    assert container(job, 1)["command"][-1] == "VC_MY_ROLE_0_HOSTS"


def test_local_image_is_pushed_to_image_repo() -> None:
    role = torchx_test_role(image="sha256:testhash")
    job = render(AppDef("test", roles=[role]), image_repo="example.com/some/repo")
    assert container(job)["image"] == "example.com/some/repo:testhash"
    assert job.images_to_push == {
        "sha256:testhash": ("example.com/some/repo", "testhash")
    }


def test_priority_class_only_when_set() -> None:
    app = AppDef("test", roles=[torchx_test_role()])
    assert (
        render(app, priority_class="high").manifests[0]["spec"]["priorityClassName"]
        == "high"
    )
    assert "priorityClassName" not in render(app).manifests[0]["spec"]


def test_min_replicas_sets_min_available_per_task() -> None:
    role = torchx_test_role(num_replicas=3, min_replicas=2)
    job = render(AppDef("test", roles=[role]))
    assert [task(job, i)["minAvailable"] for i in range(3)] == [1, 1, 0]


# -- names and labels ------------------------------------------------------------


def test_normalize_str_follows_torchx() -> None:
    assert normalize_str("-Trainer_Foo") == "trainerfoo"
    assert normalize_str("My.App") == "myapp"


def test_label_values_are_sanitised() -> None:
    assert sanitize_label_value("foo+bar") == "foo.bar"
    assert sanitize_label_value("a/b") == "a.b"
    assert sanitize_label_value("0.8.0dev0+fb") == "0.8.0dev0.fb"
    assert sanitize_label_value("--x--") == "x"
    assert len(sanitize_label_value("x" * 100)) == MAX_NAME
    labels = task(render(AppDef("foo+bar", roles=[torchx_test_role(name="a/b")])))[
        "template"
    ]["metadata"]["labels"]
    assert labels["asyncsched.io/app-name"] == "foo.bar"
    assert labels["asyncsched.io/role-name"] == "a.b"


def test_long_names_are_shortened_deterministically_and_stay_unique() -> None:
    long_a, long_b = "r" * 70 + "a", "r" * 70 + "b"
    app = AppDef(
        "x" * 100,
        roles=[
            Role(long_a, image="i", entrypoint="e", num_replicas=11),
            Role(long_b, image="i", entrypoint="e"),
        ],
    )
    name = job_name(app.name, "bq4fz7dkm2pwhs")
    assert name == job_name(app.name, "bq4fz7dkm2pwhs")
    job = render(app, name=name)
    tasks = [t["name"] for t in job.manifests[0]["spec"]["tasks"]]
    assert len(set(tasks)) == len(tasks) == 12
    for t in tasks:
        assert len(f"{name}-{t}-0") <= MAX_NAME  # Volcano's pod name / hostname
    indexed = render(app, name=name, job_api="indexed")
    jobs = [m["metadata"]["name"] for m in indexed.manifests[1:]]
    assert len(set(jobs)) == 2
    assert all(len(f"{j}-10") <= MAX_NAME for j in jobs)
    assert shorten("a" * 80, 20) != shorten("a" * 79 + "b", 20)


def test_job_name_starts_with_a_letter() -> None:
    assert job_name("0day", "bcd") == "app-0day-bcd"
    assert job_name("___", "bcd") == "app-bcd"


def test_roles_with_the_same_kubernetes_name_are_rejected() -> None:
    app = AppDef(
        "a",
        roles=[
            Role("a_b", image="i", entrypoint="e"),
            Role("ab", image="i", entrypoint="e"),
        ],
    )
    with pytest.raises(SpecError, match="same Kubernetes name") as info:
        render(app)
    assert info.value.field == "roles[1].name"


# -- options and overlays ------------------------------------------------------


def test_queue_is_required_for_volcano_only() -> None:
    app = AppDef("test", roles=[torchx_test_role()])
    with pytest.raises(InvalidRunConfigException) as info:
        render_job(app, {}, name="n-1", session="s", version=VERSION)
    assert info.value.cfg_key == "queue"
    render_job(app, {"job_api": "indexed"}, name="n-1", session="s", version=VERSION)


def test_unknown_job_api_is_rejected() -> None:
    with pytest.raises(InvalidRunConfigException) as info:
        render(AppDef("test", roles=[torchx_test_role()]), job_api="jobset")
    assert info.value.cfg_key == "job_api"


def test_tolerations_and_image_pull_secrets() -> None:
    job = render(
        AppDef("test", roles=[torchx_test_role()]),
        tolerations=["gpu=true:NoSchedule", "spot"],
        image_pull_secrets=["regcred"],
    )
    spec = task(job)["template"]["spec"]
    assert spec["tolerations"] == [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"},
    ]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    with pytest.raises(InvalidRunConfigException):
        render(AppDef("test", roles=[torchx_test_role()]), tolerations=["a:b:c"])


def test_role_metadata_overlay_is_deep_merged_into_the_pod() -> None:
    overlay = {
        "spec": {
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "x", "operator": "Exists"}],
            "containers": [{"name": "sidecar", "image": "envoy"}],
        },
        "metadata": {"annotations": {"team": "ml"}},
    }
    role = torchx_test_role(metadata={"kubernetes": overlay})
    app = AppDef("test", roles=[role])
    before = copy.deepcopy(app)
    template = task(render(app))["template"]
    assert template["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert [c["name"] for c in template["spec"]["containers"]] == [
        "trainerfoo-0",
        "sidecar",
    ]
    assert template["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false",
        "team": "ml",
    }
    assert template["spec"]["tolerations"] == [{"key": "x", "operator": "Exists"}]
    assert app == before  # the caller's AppDef is untouched
    with pytest.raises(SpecError):
        render(AppDef("t", roles=[torchx_test_role(metadata={"kubernetes": "s3://x"})]))


def test_indexed_replica_identity_comes_from_the_completion_index() -> None:
    job = render(indexed_multi_role_app(), job_api="indexed")
    ps_job = job.manifests[2]
    c = ps_job["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == [
        "ps-server",
        "--replica",
        "$(ASYNCSCHED_REPLICA_ID)",
        "--peer",
        "TORCHX_RANK0_HOST",
    ]
    env = env_of(c)
    assert env["ASYNCSCHED_REPLICA_ID"] == {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }
    }
    assert env["TORCHX_RANK0_HOST"] == "app-name-42-trainer-0.app-name-42"
    assert ps_job["spec"]["template"]["spec"]["subdomain"] == "app-name-42"
    assert ps_job["spec"]["completionMode"] == "Indexed"
    service = job.manifests[0]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"asyncsched.io/app-id": "app-name-42"}


def test_backoff_limit_is_max_retries() -> None:
    job = render(indexed_multi_role_app(), job_api="indexed")
    assert [m["spec"]["backoffLimit"] for m in job.manifests[1:]] == [2, 0]
