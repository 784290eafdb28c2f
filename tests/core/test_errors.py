from __future__ import annotations

import pickle

import pytest

from asyncsched import errors
from asyncsched.errors import (
    AppFileError,
    AppStatusError,
    AsyncschedError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    SchedulerClosedError,
    SchedulerError,
    SchedulerUnavailableError,
    SpecError,
    SubmitError,
    UnknownAppException,
    UnknownSchedulerException,
    WaitTimeoutError,
)

EXAMPLES: list[tuple[AsyncschedError, type[BaseException]]] = [
    (SpecError("roles[0].num_replicas", "must be >= 1"), ValueError),
    (AppFileError("app.yaml", "roles[0].env", "must be a mapping"), SpecError),
    (
        InvalidRunConfigException("Required run option: log_dir", "log_dir", {}),
        ValueError,
    ),
    (MalformedAppHandleException("nope"), ValueError),
    (UnknownSchedulerException("nope", ["local_cwd"]), KeyError),
    (UnknownAppException("local_cwd://s/a"), LookupError),
    (
        SchedulerUnavailableError("local_docker", "aiodocker missing", "pip x"),
        RuntimeError,
    ),
    (SchedulerError("boom"), RuntimeError),
    (SubmitError("boom"), SchedulerError),
    (SchedulerClosedError("closed"), RuntimeError),
    (WaitTimeoutError("app-1", 2.5), TimeoutError),
]


@pytest.mark.parametrize(("exc", "builtin"), EXAMPLES)
def test_every_error_is_rooted_and_has_its_builtin(
    exc: AsyncschedError, builtin: type[BaseException]
) -> None:
    assert isinstance(exc, AsyncschedError)
    assert isinstance(exc, builtin)


@pytest.mark.parametrize(("exc", "builtin"), EXAMPLES)
def test_errors_survive_pickling(
    exc: AsyncschedError, builtin: type[BaseException]
) -> None:
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert str(copy) == str(exc)
    assert copy.__dict__ == exc.__dict__


def test_messages_name_the_cause() -> None:
    assert (
        str(SpecError("roles[0].image", "is MISSING")) == "roles[0].image: is MISSING"
    )
    assert str(UnknownSchedulerException("foo", ["b", "a"])) == (
        "Undefined scheduler backend: foo. Use one of: ['a', 'b']"
    )
    assert "Given: <EMPTY>" in str(
        InvalidRunConfigException("Required run option: x", "x")
    )
    unavailable = SchedulerUnavailableError(
        "local_docker", "aiodocker is not installed", "pip install 'asyncsched[docker]'"
    )
    assert "pip install 'asyncsched[docker]'" in str(unavailable)
    assert "2.5s" in str(WaitTimeoutError("app-1", 2.5))


def test_app_status_error_carries_status() -> None:
    status = object()
    exc = AppStatusError(status, "job did not succeed")  # type: ignore[arg-type]
    assert exc.status is status
    assert isinstance(exc, RuntimeError)


def test_all_is_sorted_and_complete() -> None:
    assert list(errors.__all__) == sorted(errors.__all__)
    public = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    }
    assert public == set(errors.__all__)
