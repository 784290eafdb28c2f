from __future__ import annotations

import asyncsched.errors
import asyncsched.specs


def test_all_is_sorted_and_complete() -> None:
    exported = asyncsched.specs.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(asyncsched.specs, name), name


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
