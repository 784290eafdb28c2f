"""``defer_full_gc``: no automatic full collection inside the block, the
collector's setting restored after the outermost one."""

from __future__ import annotations

import gc

import pytest

from asyncsched.runner import defer_full_gc


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def _grow_long_lived(n: int = 300_000) -> list[list[int]]:
    """Enough surviving containers that CPython would run a full collection."""
    return [[i] for i in range(n)]


@pytest.fixture(autouse=True)
def _collector_enabled() -> None:
    if not gc.isenabled():
        pytest.skip("the garbage collector is disabled in this process")


def test_growth_outside_the_block_triggers_a_full_collection() -> None:
    # the control for the next test: the same growth does trigger one
    gc.collect()
    before = _full_collections()
    kept = _grow_long_lived()
    assert _full_collections() > before
    del kept


def test_no_automatic_full_collection_runs_inside_the_block() -> None:
    gc.collect()
    with defer_full_gc():
        before = _full_collections()
        kept = _grow_long_lived()
        assert _full_collections() == before
        # young generations are still collected
        young_before = gc.get_stats()[0]["collections"]
        garbage: list[list[list[int]]] = [[[]] for _ in range(10_000)]
        del garbage
        assert gc.get_stats()[0]["collections"] > young_before
    del kept


def test_threshold_is_restored_after_the_outermost_block() -> None:
    original = gc.get_threshold()
    with defer_full_gc():
        deferred = gc.get_threshold()
        with defer_full_gc():
            pass
        assert gc.get_threshold() == deferred  # the inner exit keeps it deferred
    assert deferred[2] > original[2]
    assert gc.get_threshold() == original


def test_threshold_is_restored_when_the_block_raises() -> None:
    original = gc.get_threshold()
    with pytest.raises(RuntimeError), defer_full_gc():
        raise RuntimeError("boom")
    assert gc.get_threshold() == original
