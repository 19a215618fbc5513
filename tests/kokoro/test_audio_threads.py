"""Encoders used from worker threads, as the server does: a close from the event loop while an
encode runs in a thread must never free the codec under it (issue 11: a segfault in libavformat
killed the whole server when a client vanished mid-encode)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from kokoro_server.audio import StreamEncoder, encode_off_loop

pytestmark = pytest.mark.kokoro

COMPRESSED = ("mp3", "opus", "aac", "flac")


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(24000 * seconds)) * 0.2).astype(np.float32)


@pytest.mark.parametrize("fmt", COMPRESSED)
def test_close_while_a_thread_encodes_is_deferred_to_that_thread(fmt: str) -> None:
    """Catch the encoder inside a long encode, close it from here, and the encode still completes
    on a live codec; the codec is freed when it returns and nothing more can be encoded."""
    for attempt in range(5):  # bounded: a larger chunk each time until the close lands mid-encode
        encoder = StreamEncoder(fmt=fmt, sample_rate=48000 if fmt != "flac" else 24000)
        results: list[object] = []
        seconds = 30 * 2**attempt
        thread = threading.Thread(target=lambda: results.append(encoder.encode(noise(seconds))))  # noqa: B023 (joined below)
        thread.start()
        while not encoder.busy and thread.is_alive():
            pass
        closed_mid_encode = encoder.busy
        encoder.close()
        thread.join(60)
        assert not thread.is_alive()
        if closed_mid_encode:
            break
    assert closed_mid_encode, "the close never landed during an encode"
    assert len(results) == 1 and isinstance(results[0], bytes) and results[0]
    assert encoder.closed and not encoder.busy
    with pytest.raises(RuntimeError):
        encoder.encode(noise(0.1))
    with pytest.raises(RuntimeError):
        encoder.finish()


def test_two_threads_never_encode_into_one_codec_at_once() -> None:
    encoder = StreamEncoder(fmt="mp3", sample_rate=48000)
    errors: list[BaseException] = []
    done: list[bytes] = []

    def work() -> None:
        try:
            done.append(encoder.encode(noise(20)))
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # every call either ran alone or was refused as "in use"; none ran concurrently
    assert len(done) + len(errors) == 4 and done
    assert all("in use" in str(exc) for exc in errors)
    assert encoder.finish() is not None


@pytest.mark.parametrize("fmt", ("mp3", "opus", "aac"))
def test_cancelling_the_awaiting_task_leaves_the_encode_to_finish_then_frees(fmt: str) -> None:
    """The server's path: the task awaiting encode_off_loop is cancelled (client gone) and its
    cleanup closes the encoder at once, while the worker thread is still encoding."""

    async def scenario() -> tuple[bool, bool]:
        encoder = StreamEncoder(fmt=fmt, sample_rate=48000)
        task = asyncio.create_task(encode_off_loop(encoder, noise(120)))
        while not encoder.busy:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        encoder.close()  # what the session's cleanup does
        was_busy = encoder.busy
        for _ in range(6000):  # bounded wait for the worker thread to finish and free it
            if not encoder.busy:
                break
            await asyncio.sleep(0.01)
        return was_busy, encoder.busy

    was_busy, still_busy = asyncio.run(scenario())
    assert was_busy and not still_busy
