"""Run options that mean the same on every backend read the same everywhere."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from asyncsched.schedulers.docker._opts import run_opts as docker_run_opts
from asyncsched.schedulers.kubernetes._opts import kubernetes_run_opts
from asyncsched.schedulers.local._opts import local_run_opts
from asyncsched.schedulers.slurm._opts import slurm_run_opts
from asyncsched.specs import runopts

BACKENDS: dict[str, Callable[[], runopts]] = {
    "local": local_run_opts,
    "docker": docker_run_opts,
    "kubernetes": kubernetes_run_opts,
    "slurm": slurm_run_opts,
}


def test_fail_fast_is_a_bool_on_by_default_with_one_help_on_every_backend() -> None:
    declared = {name: make().get("fail_fast") for name, make in BACKENDS.items()}
    for name, opt in declared.items():
        assert opt is not None, name
        assert (opt.opt_type, opt.default, opt.is_required) == (bool, True, False)
    helps = {opt.help for opt in declared.values() if opt is not None}
    assert len(helps) == 1
    assert "False lets them run to their own end" in helps.pop()


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_fail_fast_false_resolves_to_false(backend: str) -> None:
    opts = BACKENDS[backend]()
    assert opts.resolve({"fail_fast": False})["fail_fast"] is False
    assert opts.resolve({})["fail_fast"] is True
