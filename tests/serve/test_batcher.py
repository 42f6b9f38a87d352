"""The micro-batcher alone: length-aware batches, back-pressure, deadlines, draining on stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tinyplm.inference.records import TextInput
from tinyplm.serve.batcher import ClientGone, MicroBatcher, QueueFull, Stopped


class Recorder:
    """A ``run`` that records each batch's texts; ``gate`` holds it until set."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[list[str]] = []
        self.gate = gate

    def __call__(self, items):
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append([x.text for x in items])
        return [x.text.upper() for x in items]


def test_batches_take_the_oldest_and_the_nearest_in_length() -> None:
    gate = threading.Event()
    run = Recorder(gate)

    async def scenario():
        b = MicroBatcher(run, max_batch=3, max_wait_s=0.0, max_queue=100)
        b.start()
        first = asyncio.create_task(b.submit([TextInput("x" * 50)], 5))  # runs alone, held by the gate
        await asyncio.sleep(0.05)
        sizes = (5, 80, 6, 79, 7, 81)
        rest = [asyncio.create_task(b.submit([TextInput("y" * n)], 5)) for n in sizes]
        await asyncio.sleep(0.05)
        gate.set()
        results = await asyncio.gather(first, *rest)
        await b.stop()
        return results

    results = asyncio.run(scenario())
    assert [len(b) for b in run.batches] == [1, 3, 3]
    assert [sorted(map(len, b)) for b in run.batches[1:]] == [[5, 6, 7], [79, 80, 81]]  # oldest (5) + nearest
    preds, timing = results[1]
    assert preds == ["Y" * 5] and timing.batch == 3 and timing.queue_s > 0.04


def test_full_queue_refuses_at_once_and_timeouts_leave_the_queue() -> None:
    gate = threading.Event()

    async def scenario():
        b = MicroBatcher(Recorder(gate), max_batch=1, max_wait_s=0.0, max_queue=2)
        b.start()
        held = asyncio.create_task(b.submit([TextInput("a")], 5))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull):
            await b.submit([TextInput("b")] * 3, 5)
        with pytest.raises(TimeoutError):
            await b.submit([TextInput("c"), TextInput("d")], 0.05)
        depth_after_timeout = b.depth
        gate.set()
        await held
        await b.stop()
        with pytest.raises(Stopped):
            await b.submit([TextInput("e")], 1)
        return depth_after_timeout

    assert asyncio.run(scenario()) == 0


def test_stop_answers_everything_queued_first() -> None:
    gate = threading.Event()
    run = Recorder(gate)

    async def scenario():
        b = MicroBatcher(run, max_batch=2, max_wait_s=10.0, max_queue=10)
        b.start()
        tasks = [asyncio.create_task(b.submit([TextInput(t)], 5)) for t in "abc"]
        await asyncio.sleep(0.05)
        stopping = asyncio.create_task(b.stop())
        await asyncio.sleep(0.05)
        gate.set()
        await stopping
        return [await t for t in tasks]

    results = asyncio.run(scenario())
    assert [r[0] for r in results] == [["A"], ["B"], ["C"]] and sum(map(len, run.batches)) == 3


class Overlap:
    """A ``run`` that holds each batch a moment and records how many batches ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.threads: set[str] = set()

    def __call__(self, items):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.current_thread().name)
        threading.Event().wait(0.05)
        with self.lock:
            self.now -= 1
        return [x.text for x in items]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_run_that_many_batches_at_once_and_answer_each_request_its_own(workers: int) -> None:
    run = Overlap()

    async def scenario():
        b = MicroBatcher(run, max_batch=2, max_wait_s=0.0, max_queue=100, workers=workers)
        b.start()
        texts = [f"t{i}" for i in range(12)]
        results = await asyncio.gather(*(b.submit([TextInput(t)], 5) for t in texts))
        await b.stop()
        return texts, results

    texts, results = asyncio.run(scenario())
    assert [r[0] for r in results] == [[t] for t in texts]
    assert run.most == workers and len(run.threads) == workers


def test_stop_waits_for_every_batch_in_flight() -> None:
    run = Overlap()

    async def scenario():
        b = MicroBatcher(run, max_batch=1, max_wait_s=0.0, max_queue=100, workers=2)
        b.start()
        tasks = [asyncio.create_task(b.submit([TextInput(t)], 5)) for t in "abcde"]
        await asyncio.sleep(0.01)
        await b.stop()
        return [t.done() for t in tasks], [t.result()[0] for t in tasks]

    done, answers = asyncio.run(scenario())
    assert all(done) and answers == [[c] for c in "abcde"]


def test_workers_must_be_positive() -> None:
    async def scenario():
        MicroBatcher(Overlap(), workers=0).start()

    with pytest.raises(ValueError, match="workers must be at least 1"):
        asyncio.run(scenario())


def test_free_workers_share_what_is_queued() -> None:
    gate = threading.Event()
    run = Recorder(gate)

    async def scenario():
        b = MicroBatcher(run, max_batch=8, max_wait_s=0.05, max_queue=100, workers=2)
        b.start()
        tasks = [asyncio.create_task(b.submit([TextInput("x" * (i + 1))], 5)) for i in range(8)]
        await asyncio.sleep(0.2)
        gate.set()
        await asyncio.gather(*tasks)
        await b.stop()

    asyncio.run(scenario())
    assert sorted(map(len, run.batches)) == [4, 4]  # 8 queued, 2 free workers: half each, not 8 and 0


class Slow(Recorder):
    """A ``run`` that takes ``seconds`` a call."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def __call__(self, items):
        import time

        time.sleep(self.seconds)
        return super().__call__(items)


def test_a_request_past_max_batch_runs_in_chunks_and_stops_when_it_times_out() -> None:
    """One request of 10 texts at max_batch 2 runs as five passes, answered in order; timed out
    during its second pass, the rest of its work is dropped, so the request queued behind it is
    answered next, not after all ten texts (before: 504s for every request meanwhile)."""
    run = Slow(0.3)

    async def scenario():
        b = MicroBatcher(run, max_batch=2, max_wait_s=0.0, max_queue=100)
        b.start()
        whole, _ = await b.submit([TextInput(f"t{i}") for i in range(10)], 5)
        run.batches.clear()
        big = asyncio.create_task(b.submit([TextInput(f"b{i}") for i in range(10)], 0.45))
        await asyncio.sleep(0.01)
        small = asyncio.create_task(b.submit([TextInput("small")], 5))
        with pytest.raises(TimeoutError):
            await big
        answered, _ = await small
        await b.stop()
        return whole, answered

    whole, answered = asyncio.run(scenario())
    assert whole == [f"T{i}" for i in range(10)]
    assert answered == ["SMALL"]
    big = [b for b in run.batches if b[0].startswith("b")]
    assert len(big) <= 3 and run.batches[-1] == ["small"]  # stopped at its deadline (two passes, fewer if late)


def test_a_request_given_up_by_its_client_leaves_the_queue_and_stops_its_work() -> None:
    """A client that disconnected still had its request computed whole: eight abandoned requests of
    32 long texts each held the model until their deadlines, and a live client's small request got
    a 504 meanwhile. A cancelled submit leaves the queue at once and its running work stops between
    passes."""
    run = Slow(0.3)

    async def scenario():
        b = MicroBatcher(run, max_batch=2, max_wait_s=0.0, max_queue=100)
        b.start()
        big = asyncio.create_task(b.submit([TextInput(f"b{i}") for i in range(10)], 30))
        await asyncio.sleep(0.01)
        queued = asyncio.create_task(b.submit([TextInput(f"q{i}") for i in range(4)], 30))
        left = asyncio.get_running_loop().create_future()  # the client's disconnect, as the endpoint gives it
        watched = asyncio.create_task(b.submit([TextInput("w")], 30, left))
        await asyncio.sleep(0.01)
        depth = b.depth
        left.set_result({"type": "http.disconnect"})
        with pytest.raises(ClientGone):
            await watched
        queued.cancel()  # given up while waiting in the queue (its task cancelled)
        await asyncio.sleep(0)
        gone_depth = b.depth
        big.cancel()  # given up while running
        small = asyncio.create_task(b.submit([TextInput("small")], 30))
        answered, _ = await small
        await b.stop()
        return depth, gone_depth, answered

    depth, gone_depth, answered = asyncio.run(scenario())
    assert (depth, gone_depth, answered) == (5, 0, ["SMALL"])
    assert not any(batch[0].startswith(("q", "w")) for batch in run.batches)
    assert len([batch for batch in run.batches if batch[0].startswith("b")]) <= 2  # stopped after its pass
