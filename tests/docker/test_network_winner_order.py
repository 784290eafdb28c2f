"""Concurrent creators of one Docker network all pick the same, oldest one."""

from __future__ import annotations

from asyncsched.schedulers.docker._client import _created_order


def test_the_oldest_network_wins_though_docker_trims_trailing_zeros() -> None:
    # Docker's RFC 3339 times drop trailing zeros of the fraction: compared as
    # plain text, .51 sorts before .5 and processes would disagree on the winner
    nets = [
        {"Id": "b", "Created": "2026-11-27T14:20:01.51Z"},
        {"Id": "a", "Created": "2026-11-27T14:20:01.5Z"},
        {"Id": "c", "Created": "2026-11-27T14:20:01Z"},
    ]
    nets.sort(key=_created_order)
    assert [n["Id"] for n in nets] == ["c", "a", "b"]
