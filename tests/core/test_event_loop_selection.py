"""anyio-marked tests really run on each backend; the rest stay on asyncio.

Guards tests/conftest.py: pytest-asyncio's auto mode would otherwise run the
trio variant of an anyio-marked test on asyncio, silently.
"""

from __future__ import annotations

import pytest
import sniffio


@pytest.mark.anyio
async def test_anyio_marked_test_runs_on_its_backend(anyio_backend: str) -> None:
    assert sniffio.current_async_library() == anyio_backend


async def test_unmarked_async_test_runs_on_asyncio() -> None:
    assert sniffio.current_async_library() == "asyncio"
