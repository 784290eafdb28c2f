"""A runner imports a backend's heavy dependencies outside the event loop's thread."""

from __future__ import annotations

from tests.import_threads import assert_imported_outside_the_loop_thread


def test_first_use_of_a_backend_imports_it_outside_the_event_loop_thread() -> None:
    # aiohttp alone is ~0.3 s of CPU: in the loop thread it stalls every task
    assert_imported_outside_the_loop_thread(
        {"aiohttp", "aiodocker"},
        """
from asyncsched.runner import Runner

async with Runner("t") as runner:
    await runner.scheduler_run_opts("local_docker")
""",
    )
