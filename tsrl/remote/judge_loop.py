"""The openai judge's private event loop: `start_loop` runs one on a background thread, so that the trainer's
synchronous `compare` / `score` / `score_lists` calls can run a whole batch concurrently on it; `shutdown` cancels
what still runs there, closes the judge's connections and stops the loop and its thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def start_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new event loop, running forever on its own daemon thread (named tsrl-judge)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="tsrl-judge", daemon=True)
    thread.start()
    return loop, thread


def shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread, transport: Any) -> None:
    """Cancel what still runs on a judge's loop, close its connections, stop the loop and its thread."""
    if loop.is_closed():
        return

    async def close() -> None:
        tasks = asyncio.all_tasks() - {asyncio.current_task()}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if transport is not None:
            await transport.aclose()

    if threading.current_thread() is thread:  # collected on its own loop, which cannot wait for itself
        loop.create_task(close()).add_done_callback(lambda _: loop.stop())
        return
    asyncio.run_coroutine_threadsafe(close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
