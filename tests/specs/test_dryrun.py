from __future__ import annotations

from asyncsched.specs import AppDryRunInfo


def test_repr_calls_fmt_once_with_request() -> None:
    request = {"cmd": ["echo", "hi"]}
    seen: list[object] = []

    def fmt(req: dict[str, list[str]]) -> str:
        seen.append(req)
        return "formatted"

    info = AppDryRunInfo(request, fmt)
    assert repr(info) == "formatted"
    assert seen == [request]
    assert seen[0] is request
    assert info.request is request


def test_request_is_mutable_and_repr_follows() -> None:
    info = AppDryRunInfo([1], lambda r: f"n={len(r)}")
    info.request.append(2)
    assert repr(info) == "n=2"
    info.request = []
    assert repr(info) == "n=0"


def test_back_references_start_unset() -> None:
    info = AppDryRunInfo("req", str)
    assert info._app is None
    assert info._cfg is None
    assert info._scheduler is None
