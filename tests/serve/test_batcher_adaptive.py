"""The batcher's adaptive policy: a free worker never waits for a batch to fill; batches form from
what queues while every worker is busy; the only wait is for the clients of a batch of several just
answered. ``max_wait_s`` is set large (1 s) in most tests, so a test fails if a wait is left where
none belongs."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tinyplm.inference.records import TextInput
from tinyplm.serve.batcher import MicroBatcher

LONG_WAIT_S = 1.0  # a wait this long would show in every latency below


class Held:
    """A ``run`` that records each batch's texts as it starts, and holds a batch holding a text
    named in ``gates`` until that text's gate is set."""

    def __init__(self, *held: str) -> None:
        self.gates = {text: threading.Event() for text in held}
        self.started: list[list[str]] = []

    def __call__(self, items):
        texts = [x.text for x in items]
        self.started.append(texts)
        for text in texts:
            if text in self.gates:
                self.gates[text].wait(10)
        return [t.upper() for t in texts]

    async def until_started(self, count: int) -> None:
        """Return once ``count`` batches have started (in this test's own loop: no fixed sleeps)."""
        for _ in range(1000):
            if len(self.started) >= count:
                return
            await asyncio.sleep(0.002)
        raise AssertionError(f"only {len(self.started)} of {count} batches started")


def test_one_client_never_waits_for_a_batch_to_fill() -> None:
    run = Held()

    async def scenario():
        b = MicroBatcher(run, max_batch=32, max_wait_s=LONG_WAIT_S, max_queue=100)
        b.start()
        took = []
        for text in ("a", "b", "c", "d", "e"):  # one client: each request after the last answer
            start = time.perf_counter()
            preds, timing = await b.submit([TextInput(text)], 5)
            took.append(time.perf_counter() - start)
            assert preds == [text.upper()] and timing.batch == 1 and timing.queue_s < 0.1
        await b.stop()
        return took

    took = asyncio.run(scenario())
    assert run.started == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert max(took) < LONG_WAIT_S / 5  # no wait: neither from the request's arrival nor from the last answer


def test_what_queues_while_a_batch_runs_is_the_next_batch_at_once() -> None:
    run = Held("a")

    async def scenario():
        b = MicroBatcher(run, max_batch=32, max_wait_s=LONG_WAIT_S, max_queue=100)
        b.start()
        first = asyncio.create_task(b.submit([TextInput("a")], 5))
        await run.until_started(1)  # "a" runs alone, held
        later = []
        for text in "bcd":  # arriving one by one during the pass
            later.append(asyncio.create_task(b.submit([TextInput(text)], 5)))
            await asyncio.sleep(0.01)
        assert len(run.started) == 1 and b.depth == 3  # queued while the only worker is busy
        released = time.perf_counter()
        run.gates["a"].set()
        results = await asyncio.gather(*later)
        after = time.perf_counter() - released
        await first
        await b.stop()
        return results, after

    results, after = asyncio.run(scenario())
    assert run.started == [["a"], ["b", "c", "d"]]
    assert [timing.batch for _, timing in results] == [3, 3, 3]
    assert after < LONG_WAIT_S / 5  # dispatched when the worker freed, not after a wait to fill


def test_requests_queued_in_one_turn_of_the_loop_share_a_pass() -> None:
    run = Held()

    async def scenario():
        b = MicroBatcher(run, max_batch=32, max_wait_s=0.0, max_queue=100)
        b.start()
        await asyncio.gather(*(b.submit([TextInput(t)], 5) for t in "xyz"))  # all queued before the worker runs
        await b.stop()

    asyncio.run(scenario())
    assert run.started == [["x", "y", "z"]]


def test_with_one_worker_busy_a_lone_request_runs_on_a_free_one_at_once() -> None:
    run = Held("slow")

    async def scenario():
        b = MicroBatcher(run, max_batch=8, max_wait_s=LONG_WAIT_S, max_queue=100, workers=2)
        b.start()
        slow = asyncio.create_task(b.submit([TextInput("slow")], 5))
        await run.until_started(1)
        start = time.perf_counter()
        preds, timing = await b.submit([TextInput("fast")], 5)
        took = time.perf_counter() - start
        still_held = not slow.done()
        run.gates["slow"].set()
        await slow
        await b.stop()
        return preds, timing, took, still_held

    preds, timing, took, still_held = asyncio.run(scenario())
    assert preds == ["FAST"] and timing.batch == 1 and still_held
    assert took < LONG_WAIT_S / 5


def test_a_worker_that_frees_takes_all_that_queued_when_the_others_are_busy() -> None:
    run = Held("h1", "h2")

    async def scenario():
        b = MicroBatcher(run, max_batch=8, max_wait_s=LONG_WAIT_S, max_queue=100, workers=2)
        b.start()
        held = [asyncio.create_task(b.submit([TextInput("h1")], 5))]
        await run.until_started(1)
        held.append(asyncio.create_task(b.submit([TextInput("h2")], 5)))
        await run.until_started(2)  # both workers busy
        queued = [asyncio.create_task(b.submit([TextInput(f"q{i}")], 5)) for i in range(6)]
        await asyncio.sleep(0.02)
        assert b.depth == 6
        run.gates["h1"].set()
        await asyncio.gather(*queued)  # answered while h2 is still held
        run.gates["h2"].set()
        await asyncio.gather(*held)
        await b.stop()

    asyncio.run(scenario())
    assert run.started == [["h1"], ["h2"], [f"q{i}" for i in range(6)]]  # one free worker: no share to keep back


@pytest.mark.parametrize("workers", [1, 2])
def test_a_queued_request_past_its_deadline_leaves_while_the_workers_are_busy(workers: int) -> None:
    run = Held(*(f"h{i}" for i in range(workers)))

    async def scenario():
        b = MicroBatcher(run, max_batch=8, max_wait_s=LONG_WAIT_S, max_queue=100, workers=workers)
        b.start()
        held = []
        for i in range(workers):
            held.append(asyncio.create_task(b.submit([TextInput(f"h{i}")], 5)))
            await run.until_started(i + 1)
        with pytest.raises(TimeoutError):
            await b.submit([TextInput("late")], 0.05)
        depth = b.depth
        for gate in run.gates.values():
            gate.set()
        await asyncio.gather(*held)
        await b.stop()
        return depth

    assert asyncio.run(scenario()) == 0
    assert ["late"] not in run.started


def test_after_a_batch_of_several_the_returning_clients_share_the_next_pass() -> None:
    run = Held()

    async def scenario():
        b = MicroBatcher(run, max_batch=32, max_wait_s=LONG_WAIT_S, max_queue=100)
        b.start()
        await asyncio.gather(*(b.submit([TextInput(t)], 5) for t in "xyz"))  # three clients, one pass
        first = asyncio.create_task(b.submit([TextInput("x2")], 5))  # they come back one by one
        await asyncio.sleep(0.02)
        assert len(run.started) == 1 and b.depth == 1  # the first back waits for the other two
        start = time.perf_counter()
        rest = [asyncio.create_task(b.submit([TextInput(t)], 5)) for t in ("y2", "z2")]
        await asyncio.gather(first, *rest)
        joined = time.perf_counter() - start
        await asyncio.sleep(LONG_WAIT_S * 1.2)  # past the wait: a later request runs at once
        start = time.perf_counter()
        await b.submit([TextInput("late")], 5)
        late = time.perf_counter() - start
        await b.stop()
        return joined, late

    joined, late = asyncio.run(scenario())
    assert run.started == [["x", "y", "z"], ["x2", "y2", "z2"], ["late"]]
    assert joined < LONG_WAIT_S / 5 and late < LONG_WAIT_S / 5  # company came, so no wait ran out


def test_returning_clients_that_do_not_come_are_waited_for_at_most_max_wait() -> None:
    run = Held()
    wait_s = 0.15

    async def scenario():
        b = MicroBatcher(run, max_batch=32, max_wait_s=wait_s, max_queue=100)
        b.start()
        await asyncio.gather(*(b.submit([TextInput(t)], 5) for t in "xyz"))
        start = time.perf_counter()
        _, timing = await b.submit([TextInput("alone")], 5)  # the other two never come back
        took = time.perf_counter() - start
        await b.stop()
        return took, timing

    took, timing = asyncio.run(scenario())
    assert timing.batch == 1 and wait_s * 0.5 < took < wait_s + 0.5
