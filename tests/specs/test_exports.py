"""The public surface is declared: ``__all__`` lists exactly the public names."""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing

import pytest

import asyncsched
import asyncsched.errors
import asyncsched.specs

# from __future__ import annotations binds this name in every module
_NOT_EXPORTS = {"annotations"}


def _public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in _NOT_EXPORTS
        and not isinstance(value, types.ModuleType)
        and getattr(typing, name, object()) is not value  # Any, TYPE_CHECKING...
    }


@pytest.mark.parametrize(
    "module", [asyncsched.specs, asyncsched.errors], ids=lambda m: m.__name__
)
def test_all_lists_exactly_the_public_names(module: types.ModuleType) -> None:
    exported = module.__all__
    assert exported == sorted(exported)
    assert set(exported) == _public_names(module)


def test_specs_exports_resource() -> None:
    assert "Resource" in asyncsched.specs.__all__
    assert asyncsched.specs.Resource(cpu=1, gpu=0, memMB=1).cpu == 1


def _public_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(asyncsched.__path__, "asyncsched."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_module_declares_existing_exports(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # a backend whose extra is not installed
        pytest.skip(f"{name}: {exc}")
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == []


def test_errors_are_reexported_not_redefined() -> None:
    for name in (
        "InvalidRunConfigException",
        "MalformedAppHandleException",
        "UnknownAppException",
        "UnknownSchedulerException",
        "AppStatusError",
        "SpecError",
    ):
        assert getattr(asyncsched.specs, name) is getattr(asyncsched.errors, name)
