from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from asyncsched.errors import (
    AsyncschedWarning,
    SchedulerUnavailableError,
    UnknownSchedulerException,
)
from asyncsched.schedulers import (
    _BuiltinFactory,
    get_default_scheduler_name,
    get_scheduler,
    get_scheduler_factories,
)
from asyncsched.testing import InMemoryScheduler


def _install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    dist = tmp_path / "fake_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-plugin\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = types.ModuleType("fake_plugin_mod")

    def create(session_name: str, **kwargs: Any) -> InMemoryScheduler:
        return InMemoryScheduler(session_name, **kwargs)

    module.create_scheduler = create  # type: ignore[attr-defined]
    module.factory = create  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_plugin_mod", module)


def test_builtins_and_default() -> None:
    factories = get_scheduler_factories()
    assert {"local_cwd", "local_dir", "local_docker"} <= set(factories)
    assert next(iter(factories)) == "local_cwd"
    assert get_default_scheduler_name() == "local_cwd"
    assert get_scheduler_factories(skip_defaults=True) == {}


def test_unknown_scheduler_lists_known_names() -> None:
    with pytest.raises(UnknownSchedulerException, match="local_cwd") as info:
        get_scheduler("no_such_backend")
    assert isinstance(info.value, KeyError)
    assert info.value.scheduler == "no_such_backend"


def test_plugins_are_added_not_replacing_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(
        tmp_path,
        monkeypatch,
        "[asyncsched.schedulers]\nmine = fake_plugin_mod:factory\nother = fake_plugin_mod\n",
    )
    factories = get_scheduler_factories()
    assert {"local_cwd", "local_dir", "mine", "other"} <= set(factories)
    assert get_default_scheduler_name() == "local_cwd"
    sched = factories["mine"]("sess")
    assert isinstance(sched, InMemoryScheduler)
    assert sched.session_name == "sess"
    # a module entry point uses its create_scheduler
    assert isinstance(factories["other"]("s2"), InMemoryScheduler)


def test_plugin_clashing_with_builtin_is_ignored_unless_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(
        tmp_path,
        monkeypatch,
        "[asyncsched.schedulers]\nlocal_cwd = fake_plugin_mod:factory\n"
        "[asyncsched.schedulers.overrides]\nlocal_dir = fake_plugin_mod:factory\n",
    )
    with pytest.warns(AsyncschedWarning, match="clashes with a built-in"):
        factories = get_scheduler_factories()
    assert isinstance(factories["local_cwd"], _BuiltinFactory)
    assert isinstance(factories["local_dir"]("s"), InMemoryScheduler)


def test_missing_extra_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    factory = _BuiltinFactory(
        "fake", "asyncsched_fake_missing_dep_mod:create", extra="docker"
    )

    def fake_import(name: str) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'aiodocker'", name="aiodocker")

    monkeypatch.setattr("importlib.import_module", fake_import)
    with pytest.raises(SchedulerUnavailableError) as info:
        factory("s")
    assert info.value.hint == "pip install 'asyncsched[docker]'"
    assert "aiodocker" in str(info.value)


def test_missing_backend_module_itself_is_not_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    factory = _BuiltinFactory(
        "fake", "asyncsched_no_such_module_xyz:create", extra="docker"
    )
    with pytest.raises(ModuleNotFoundError):
        factory("s")
