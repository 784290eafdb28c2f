"""The web example's per-client SSE buffer: bounded in bytes, slow clients
slow their producers down, stalled clients are told."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("starlette", reason="pip install 'asyncsched[web]'")

from docs.examples.asgi_app import FrameBuffer, Stalled


async def test_slow_client_gets_every_frame_and_the_bytes_stay_bounded() -> None:
    buffer = FrameBuffer(max_bytes=250, stall_s=10)
    frames = [f"{i:099d}\n".encode() for i in range(40)]  # 100 bytes each
    largest = 0

    async def produce() -> None:
        nonlocal largest
        for frame in frames:
            await buffer.put(frame)
            largest = max(largest, buffer.size)
        buffer.close()

    got = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            async for frame in buffer:
                got.append(frame)
                await anyio.sleep(0.002)  # a client slower than its producer
    assert got == frames
    assert largest == 200  # a third frame would pass the 250-byte bound


async def test_put_raises_stalled_when_the_client_takes_nothing() -> None:
    buffer = FrameBuffer(max_bytes=100, stall_s=0.2)
    await buffer.put(b"x" * 100)
    with anyio.fail_after(10), pytest.raises(Stalled, match=r"read nothing for 0\.2 s"):
        await buffer.put(b"y")
    assert buffer.size == 100


async def test_frame_over_the_bound_passes_alone() -> None:
    buffer = FrameBuffer(max_bytes=10, stall_s=0.2)
    with anyio.fail_after(10):
        await buffer.put(b"z" * 50)  # empty buffer: it goes in
    with anyio.fail_after(10), pytest.raises(Stalled):
        await buffer.put(b"a")


async def test_dropping_close_replaces_the_queue_with_the_final_frame() -> None:
    buffer = FrameBuffer(max_bytes=100, stall_s=1)
    await buffer.put(b"1")
    await buffer.put(b"2")
    buffer.close(b"event: lagged\n\n", drop=True)
    assert [frame async for frame in buffer] == [b"event: lagged\n\n"]
    with pytest.raises(anyio.ClosedResourceError):
        await buffer.put(b"3")


async def test_offer_puts_a_frame_only_if_it_fits_and_never_waits() -> None:
    buffer = FrameBuffer(max_bytes=10, stall_s=30)
    assert buffer.offer(b"x" * 50)  # an empty buffer takes any frame
    assert not buffer.offer(b"y")  # full: refused at once, nothing queued
    assert buffer.size == 50
    assert await buffer.take() == b"x" * 50
    assert buffer.offer(b"12345")
    assert buffer.offer(b"67890")
    assert not buffer.offer(b"!")  # 11 bytes would pass the bound
    buffer.close()
    assert not buffer.offer(b"")  # closed


async def test_take_joins_the_frames_queued_in_order_up_to_the_limit() -> None:
    buffer = FrameBuffer(max_bytes=1000, stall_s=30)
    for frame in (b"a\n\n", b"bb\n\n", b"ccc\n\n", b"d" * 20):
        await buffer.put(frame)
    assert await buffer.take(up_to=12) == b"a\n\nbb\n\nccc\n\n"  # one write
    assert await buffer.take(up_to=12) == b"d" * 20  # alone over the limit
    assert buffer.size == 0
    buffer.close(b"end\n\n")
    assert await buffer.take(up_to=12) == b"end\n\n"
    assert await buffer.take(up_to=12) == b""  # closed and empty
