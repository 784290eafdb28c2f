"""Pure pieces of the local backend: env/PATH, GPUs, providers, factories, state rules."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from asyncsched.schedulers import get_scheduler
from asyncsched.schedulers.local._env import (
    child_env,
    join_PATH,
    replica_env,
    role_PATH,
)
from asyncsched.schedulers.local._gpus import assign_cuda_devices, parse_gpu_list
from asyncsched.schedulers.local._logs import INDEX_ENTRY
from asyncsched.schedulers.local._process import find_executable, pid_start_time
from asyncsched.schedulers.local._records import default_state_dir, pointer_path
from asyncsched.schedulers.local._state import (
    RetryAction,
    RetryCounters,
    decide_retry,
)
from asyncsched.schedulers.local_scheduler import (
    CWDImageProvider,
    LocalDirectoryImageProvider,
    LocalScheduler,
    create_scheduler,
)
from asyncsched.specs import AppState, RetryPolicy, Role, rollup_state


# joining PATH fragments
@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((None,), ""),
        (("",), ""),
        (("", None), ""),
        (("/a", None), "/a"),
        ((None, "/b"), "/b"),
        (("/a:", ":/b"), "/a:/b"),
        ((":/a:/c:", "/b"), "/a:/c:/b"),
    ],
)
def test_join_path(parts: tuple[str | None, ...], expected: str) -> None:
    assert join_PATH(*parts) == expected


# PATH of the request and of the child
def test_path_order_without_prepend_cwd() -> None:
    req = role_PATH("/home/bob", [], "/dir", prepend_cwd=False)
    assert req == "/home/bob:/dir"
    env = child_env({"PATH": req}, {"PATH": "/bin:/usr/bin"})
    assert env["PATH"] == "/home/bob:/dir:/bin:/usr/bin"


def test_path_order_with_prepend_cwd_and_extra_paths() -> None:
    req = role_PATH("/home/bob", ["/extra"], "/dir", prepend_cwd=True)
    assert req == "/dir:/extra:/home/bob"
    assert (
        child_env({"PATH": req}, {"PATH": "/bin"})["PATH"]
        == "/dir:/extra:/home/bob:/bin"
    )


def test_path_with_empty_parent_env() -> None:
    req = role_PATH(None, [], "/dir", prepend_cwd=False)
    env = child_env({"PATH": req}, {})
    assert req == "/dir"
    assert env["PATH"] == "/dir"


def test_child_env_inherits_overrides_and_sets_unbuffered() -> None:
    env = child_env({"FOO": "new_bar"}, {"FOO": "bar", "HOME": "/h"})
    assert env["FOO"] == "new_bar"
    assert env["HOME"] == "/h"
    assert env["PYTHONUNBUFFERED"] == "x"
    assert child_env({"PYTHONUNBUFFERED": ""}, {})["PYTHONUNBUFFERED"] == ""


# replica environment
def test_replica_env_keeps_user_torchelastic_values() -> None:
    kw = {
        "app_id": "a-1",
        "role_name": "r",
        "replica_id": 2,
        "num_replicas": 3,
        "replica_log_dir": "/l/a-1/r/2",
        "app_log_dir": "/l/a-1",
    }
    env = replica_env({}, **kw)  # type: ignore[arg-type]
    assert env["TORCHELASTIC_ERROR_FILE"] == "/l/a-1/r/2/error.json"
    assert env["PET_LOG_DIR"] == "/l/a-1/torchelastic/r"
    assert env["TORCHX_RANK0_HOST"] == "localhost"
    assert env["ASYNCSCHED_REPLICA_ID"] == "2"
    assert env["ASYNCSCHED_NUM_REPLICAS"] == "3"
    user = {"TORCHELASTIC_ERROR_FILE": "/mine.json", "PET_LOG_DIR": "/pet"}
    env = replica_env(user, **kw)  # type: ignore[arg-type]
    assert env["TORCHELASTIC_ERROR_FILE"] == "/mine.json"
    assert env["PET_LOG_DIR"] == "/pet"


# GPU discovery and the CUDA_VISIBLE_DEVICES split
def test_gpu_count_from_nvidia_smi_output() -> None:
    out = "GPU 0: A\nGPU 1: B\n\nGPU 2: C\nGPU 3: D\n"
    assert parse_gpu_list(out) == 4
    assert parse_gpu_list("") == 0


def test_cuda_split_single_and_halves() -> None:
    assert assign_cuda_devices([("r", 1, 4)], 8) == {("r", 0): "0,1,2,3"}
    assert assign_cuda_devices([("r", 2, 3)], 8) == {
        ("r", 0): "0,1,2",
        ("r", 1): "3,4,5",
    }


def test_cuda_split_multi_role() -> None:
    got = assign_cuda_devices([("a", 2, 1), ("b", 1, 0), ("c", 3, 2)], 8)
    assert got == {
        ("a", 0): "0",
        ("a", 1): "1",
        ("c", 0): "2,3",
        ("c", 1): "4,5",
        ("c", 2): "6,7",
    }
    got = assign_cuda_devices([("r1", 2, 2), ("r2", 2, 3)], 16)
    assert list(got.values()) == ["0,1", "2,3", "4,5,6", "7,8,9"]


def test_cuda_split_all_or_nothing() -> None:
    assert assign_cuda_devices([("r", 2, 2)], 2) == {}
    assert assign_cuda_devices([("r", 2, 2)], 0) == {}
    assert assign_cuda_devices([("r", 2, 0)], 8) == {}


# image providers
def test_local_directory_provider(tmp_path: Path) -> None:
    provider = LocalDirectoryImageProvider({})
    assert provider.fetch(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError, match="absolute"):
        provider.fetch("relative/dir")
    with pytest.raises(ValueError, match="not an existing directory"):
        provider.fetch(str(tmp_path / "missing"))
    role = Role("r", str(tmp_path), entrypoint="train.py", args=["--x"])
    param = provider.get_replica_param(str(tmp_path), role)
    assert param.args == ["train.py", "--x"]
    assert param.cwd == str(tmp_path)


def test_cwd_provider() -> None:
    provider = CWDImageProvider({})
    assert provider.fetch("whatever") == os.getcwd()
    assert provider.get_cwd("whatever") == os.getcwd()
    role = Role("r", "img", entrypoint="echo", args=["hi"])
    assert provider.get_entrypoint("/x", role) == "echo"
    assert provider.get_replica_param("/x", role).args == ["echo", "hi"]


# factories and options
def test_factories_and_cache_size() -> None:
    s = create_scheduler("foo", cache_size=20, extra_paths=["foo"], unknown_kwarg=1)
    assert s.session_name == "foo"
    assert s._image_provider_class is CWDImageProvider
    assert s._table.cache_size == 20
    assert s._extra_paths == ["foo"]
    assert s.backend == "local"
    d = get_scheduler("local_dir", session_name="bar", whatever=True)
    assert isinstance(d, LocalScheduler)
    assert d._image_provider_class is LocalDirectoryImageProvider
    for bad in (0, -1):
        with pytest.raises(ValueError, match="cache_size"):
            LocalScheduler("s", cache_size=bad)


def test_find_executable(tmp_path: Path) -> None:
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert find_executable("tool", f"/nonexistent:{tmp_path}", None) == str(exe)
    assert find_executable("plain", str(tmp_path), None) is None
    assert find_executable("./tool", "", str(tmp_path)) == os.path.join(
        str(tmp_path), "./tool"
    )
    assert find_executable("tool", "", None) is None


def test_pid_start_time_of_self() -> None:
    start = pid_start_time(os.getpid())
    assert isinstance(start, int)
    assert start > 0
    assert pid_start_time(2**22 + 12345) is None


def test_state_dir_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", "/explicit")
    assert default_state_dir() == "/explicit"
    monkeypatch.delenv("ASYNCSCHED_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", "/xdg")
    assert default_state_dir() == "/xdg/asyncsched"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_state_dir().endswith(".local/state/asyncsched")
    assert pointer_path("/s", "sess", "a-1") == "/s/local/sess/a-1.json"


def test_index_entry_format() -> None:
    assert INDEX_ENTRY.size == 16
    assert INDEX_ENTRY.pack(5, 1.5) == struct.pack("<Qd", 5, 1.5)


def test_retry_decisions() -> None:
    c = RetryCounters()
    assert (
        decide_retry(RetryPolicy.REPLICA, 1, c, "r", 0) == RetryAction.RESTART_REPLICA
    )
    assert (
        decide_retry(RetryPolicy.REPLICA, 1, c, "r", 1) == RetryAction.RESTART_REPLICA
    )
    assert decide_retry(RetryPolicy.REPLICA, 1, c, "r", 0) == RetryAction.FAIL
    assert decide_retry(RetryPolicy.ROLE, 2, c, "r", 0) == RetryAction.RESTART_ROLE
    assert decide_retry(RetryPolicy.ROLE, 2, c, "r", 1) == RetryAction.RESTART_ROLE
    assert decide_retry(RetryPolicy.ROLE, 2, c, "r", 0) == RetryAction.FAIL
    assert decide_retry("APPLICATION", 1, c, "q", 0) == RetryAction.RESTART_APP
    assert decide_retry("APPLICATION", 1, c, "r", 0) == RetryAction.FAIL
    assert (
        decide_retry(RetryPolicy.APPLICATION, 0, RetryCounters(), "r", 0)
        == RetryAction.FAIL
    )


def test_app_state_rules() -> None:
    # local apps: fail-fast and cancel decide the outcome, the replicas the rest
    s, r, f = AppState.SUCCEEDED, AppState.RUNNING, AppState.FAILED
    assert rollup_state([s, r]) == r
    assert rollup_state([s, s]) == s
    assert rollup_state([f, r], decided=f) == f  # fail-fast
    assert rollup_state([f, r]) == r  # no fail-fast: the others still run
    assert rollup_state([f, s]) == f
    assert rollup_state([r], decided=AppState.CANCELLED) == AppState.CANCELLED
    assert rollup_state([AppState.PENDING, s]) == r  # waiting for a restart
