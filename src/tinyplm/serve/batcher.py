"""Adaptive micro-batching: concurrent requests share one forward pass; a lone request never waits.

A free worker does not wait for a batch to fill, as the batchers of TEI and of Triton (with no
queue delay) do not; it waits only for the clients it has just answered (the last point below).

- A request that finds a worker free runs at once: the worker takes it, with whatever else was
  queued in the same turn of the event loop (the worker lets the loop run one turn before it takes,
  so requests that arrived together share the pass), and starts the forward pass.
- While every worker is busy, requests queue. The moment a worker frees, it takes the oldest queued
  request and fills the batch with the queued ones nearest to it in length (characters, a cheap
  stand-in for tokens), up to ``max_batch`` examples: a batch pads little and the oldest request is
  never passed over. So batches form while the model works, and their size follows the load: one
  request at a time at one client, full batches once requests arrive faster than passes end.
- ``workers`` > 1 (a runtime that runs several batches at once, each on its own cores: OpenVINO
  streams, :mod:`tinyplm.models.openvino`): that many batches are in flight together, each on its
  own inference thread. An idle worker takes a lone request at once as above; when several are free
  and requests are queued, each takes at most its share, ``ceil(queued / free)``, so the free
  workers run in parallel instead of one of them taking a full batch and leaving the others idle.
  On 2 cores, batches of 16 on one core each lost to batches of 32 on both, and streams helped only
  without batching, so one stream is the default (the figures: docs/results/serve-load.md).
- Clients come back: the requests of a batch just answered are usually followed by their
  clients' next requests within a few milliseconds, a few at a time. So a worker that finds fewer
  requests queued than the last answered batch held (its clients, returning) waits for them, up to
  ``max_wait_s`` after that answer, and no longer once as many are queued or ``max_batch`` examples
  are. This is the only wait, and only after a batch of several requests: a request at a model
  answered more than ``max_wait_s`` ago, or after a batch of one, runs at once, so one client never
  waits. Without it, at many clients the first to return would run as a part batch, the rest would
  wait that whole pass and form the next, and the two groups would keep alternating (two passes a
  round instead of one).

Back-pressure: a request that would take the queue past ``max_queue`` examples is refused at once
(:class:`QueueFull`, the server's 503 with ``Retry-After``) rather than left to hang, and every
request has a deadline (``TimeoutError``; a request that times out while queued leaves the
queue; one larger than ``max_batch``, which runs alone ``max_batch`` examples a pass, stops between
passes). A request whose client goes away is given up the same way (its ``submit`` cancelled).
:meth:`MicroBatcher.stop` refuses new requests (:class:`Stopped`) and returns when every
accepted one has been answered.

Why not a batching library: the policy is ~100 lines of asyncio, and owning it lets the queue
count examples, pick batches by length and report each request's queue and inference time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tinyplm.inference.records import Input, Prediction
from tinyplm.models.finite import NanOutputs, nan_outputs


class QueueFull(Exception):
    """The queue has no room for a request's examples (``depth``: examples waiting)."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(f"the queue holds {depth} examples (limit {limit})")
        self.depth, self.limit = depth, limit


class ClientGone(Exception):
    """The request's client closed its connection before its answer was ready."""


class Stopped(Exception):
    """The batcher is stopping and takes no new requests."""


@dataclass(frozen=True)
class Timing:
    """Where one request's time went: waiting in the queue, and the inference of the batch it was in
    (tokenising, forward passes and reading the logits back); ``batch`` examples in that batch."""

    queue_s: float
    infer_s: float
    batch: int


@dataclass(eq=False)
class _Job:
    items: list[Input]
    size: float  # mean characters per example
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


@dataclass
class MicroBatcher:
    """See the module docstring. ``run`` predicts a list of inputs (called on an inference thread;
    from ``workers`` threads at once when more than one); ``on_batch(examples, seconds)`` observes
    each batch (metrics). ``max_wait_s``: how long a free worker waits for the clients of the batch
    last answered to come back (see the module docstring)."""

    run: Callable[[list[Input]], list[Prediction]]
    max_batch: int = 32
    max_wait_s: float = 0.005
    max_queue: int = 256
    on_batch: Callable[[int, float], None] | None = None
    workers: int = 1
    _queue: list[_Job] = field(default_factory=list)
    _depth: int = 0
    _closed: bool = False
    _wake: asyncio.Event | None = None
    _task: asyncio.Task | None = None
    _executor: ThreadPoolExecutor | None = None
    _running: set[asyncio.Task] = field(default_factory=set)
    _busy: int = 0
    _free: asyncio.Semaphore | None = None
    _returning: int = 0  # requests in the batch last answered: the clients expected back
    _answered_at: float = 0.0

    @property
    def depth(self) -> int:
        """Examples waiting in the queue (not counting the batch being run)."""
        return self._depth

    def start(self) -> None:
        """Start the worker on the running event loop."""
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        self._wake = asyncio.Event()
        self._free = asyncio.Semaphore(self.workers)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="tinyplm-infer")
        self._task = asyncio.get_running_loop().create_task(self._work())

    async def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on an inference thread (e.g. warm-up, before any batch)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def call_each(self, fn: Callable[[], object]) -> list[object]:
        """Run ``fn`` once on each inference thread at the same time (warm-up of every stream)."""
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(loop.run_in_executor(self._executor, fn) for _ in range(self.workers))))

    async def stop(self) -> None:
        """Refuse new requests, answer every queued one, then stop the worker and its thread."""
        self._closed = True
        if self._task is not None:
            self._wake.set()
            await self._task
            self._executor.shutdown(wait=True)
            self._task = None

    async def submit(self, items: Sequence[Input], timeout_s: float,
                     gone: asyncio.Future | None = None) -> tuple[list[Prediction], Timing]:
        """Queue ``items`` (one request) and wait for their predictions, in order. Raises
        :class:`QueueFull` or :class:`Stopped` at once, ``TimeoutError`` after ``timeout_s``, and
        :class:`ClientGone` once ``gone`` (the request's client leaving: ASGI's next ``receive``)
        completes first; the request is then given up (:meth:`_withdraw`)."""
        if self._closed or self._task is None:
            raise Stopped("the server is shutting down")
        if self._depth + len(items) > self.max_queue:
            raise QueueFull(self._depth, self.max_queue)
        loop = asyncio.get_running_loop()
        job = _Job(list(items), sum(x.size for x in items) / max(1, len(items)), loop.create_future())
        self._queue.append(job)
        self._depth += len(job.items)
        self._wake.set()
        # one timer on the job's own future (not wait_for + shield: two more futures and a task per request)
        timer = loop.call_later(timeout_s, self._expire, job)
        if gone is not None:  # a callback, not a task awaiting both: this runs for every request
            gone.add_done_callback(lambda left: self._client_left(left, job))
        try:
            return await job.future
        except asyncio.CancelledError:  # the request's own task was cancelled: no one waits for the answer
            self._withdraw(job)
            raise
        finally:
            timer.cancel()

    def _client_left(self, left: asyncio.Future, job: _Job) -> None:
        """``left`` (the wait for the client's disconnect) is over: unless it was cancelled (the
        answer came first), ``job`` is given up; an error of the wait itself counts as the client
        leaving, and is taken here so that asyncio does not report it as never retrieved."""
        if left.cancelled():
            return
        left.exception()
        self._withdraw(job, ClientGone())

    def _withdraw(self, job: _Job, why: Exception | None = None) -> None:
        """``job`` given up (its client went away): it leaves the queue if still there, its future
        fails with ``why`` (or is cancelled), and a batch running it stops between chunks once no
        request of it is waiting (:meth:`_run_chunks`)."""
        if job in self._queue:
            self._queue.remove(job)
            self._depth -= len(job.items)
        if job.future.done():
            return
        if why is not None:
            job.future.set_exception(why)
        else:
            job.future.cancel()

    def _expire(self, job: _Job) -> None:
        """``job``'s deadline: it leaves the queue if still there (an in-flight result is dropped)."""
        if job.future.done():
            return
        if job in self._queue:  # still waiting: give its place back
            self._queue.remove(job)
            self._depth -= len(job.items)
        job.future.set_exception(TimeoutError())

    async def _work(self) -> None:
        try:
            while True:
                await self._free.acquire()  # a worker is free: it takes the next batch at once
                if not await self._requests():
                    self._free.release()
                    return
                share = -(-self._depth // (self.workers - self._busy))  # see the module docstring
                task = asyncio.get_running_loop().create_task(self._infer(self._take(min(share, self.max_batch))))
                self._busy += 1
                self._running.add(task)
                task.add_done_callback(self._done)
        finally:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)

    def _done(self, task: asyncio.Task) -> None:
        self._running.discard(task)
        self._busy -= 1
        self._free.release()

    async def _requests(self) -> bool:
        """Wait until a request is queued, then let the event loop run one turn, so that requests
        that arrived together (read in the same turn) join it, and wait for returning clients
        (:meth:`_company`). ``False`` once stopping with nothing queued."""
        while True:
            while not self._queue:
                if self._closed:
                    return False
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(0)
            await self._company()
            if self._queue:  # else what was queued timed out meanwhile
                return True

    async def _company(self) -> None:
        """Wait for the clients of the batch last answered to come back: until as many requests as
        it held are queued, ``max_batch`` examples are, or ``max_wait_s`` has passed since that
        answer (see the module docstring)."""
        deadline = self._answered_at + self.max_wait_s
        while self._queue and len(self._queue) < self._returning and self._depth < self.max_batch and not self._closed:
            left = deadline - time.perf_counter()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    def _take(self, limit: int | None = None) -> list[_Job]:
        """The oldest request and the nearest in length, up to ``limit`` (default ``max_batch``)
        examples in all (the oldest alone when it holds more)."""
        limit = self.max_batch if limit is None else limit
        if not self._queue:
            return []
        oldest = self._queue[0]
        batch, count = [oldest], len(oldest.items)
        for job in sorted(self._queue[1:], key=lambda j: abs(j.size - oldest.size)):
            if count + len(job.items) <= limit:
                batch.append(job)
                count += len(job.items)
        taken = set(map(id, batch))
        self._queue = [j for j in self._queue if id(j) not in taken]
        self._depth -= count
        return batch

    async def _run_chunks(self, live: list[_Job], items: list[Input]) -> list[Prediction] | None:
        """``items`` predicted ``max_batch`` at a time (one request may hold more, up to the server's
        ``--max-texts``): between chunks, a batch whose every request has timed out is stopped
        (None), so a large request answered 504 does not keep the model busy for the requests queued
        behind it. ``on_batch`` observes each chunk."""
        loop, preds = asyncio.get_running_loop(), []
        for at in range(0, len(items), self.max_batch):
            if all(j.future.done() for j in live):
                return None
            chunk, start = items[at:at + self.max_batch], time.perf_counter()
            try:
                preds += await loop.run_in_executor(self._executor, self.run, chunk)
            except NanOutputs as exc:  # its positions in the chunk, as positions in ``items``
                raise NanOutputs(str(exc), tuple(at + i for i in exc.rows)) from None
            if self.on_batch is not None:
                self.on_batch(len(chunk), time.perf_counter() - start)
        return preds

    async def _infer(self, batch: list[_Job]) -> None:
        """Run one batch on the inference thread and hand each request its predictions."""
        live = [j for j in batch if not j.future.done()]
        if not live:
            return
        items = [x for j in live for x in j.items]
        start = time.perf_counter()
        try:
            preds = await self._run_chunks(live, items)
        except NanOutputs as exc:  # only the requests holding those inputs fail; the others run again
            others = _fail_holders(live, exc.rows)
            if len(others) < len(live):
                await self._infer(others)
                return
            _fail_all(live, exc)  # rows that name none of them: no request can be told apart
            return
        except Exception as exc:  # the server answers 500: a model failure is not the client's
            _fail_all(live, exc)
            return
        if preds is None:  # every request of the batch timed out: its work was stopped
            return
        seconds = time.perf_counter() - start
        at = 0
        for j in live:
            if not j.future.done():
                j.future.set_result((preds[at:at + len(j.items)], Timing(start - j.enqueued, seconds, len(items))))
            at += len(j.items)
        self._returning, self._answered_at = len(live), time.perf_counter()


def _fail_holders(live: list[_Job], rows: tuple[int, ...]) -> list[_Job]:
    """Fail each request of ``live`` holding one of ``rows`` (positions among all their inputs, whose
    outputs are NaN) with a :class:`~tinyplm.models.finite.NanOutputs` naming its own -> the others."""
    bad, others, at = set(rows), [], 0
    for job in live:
        own = tuple(i - at for i in range(at, at + len(job.items)) if i in bad)
        at += len(job.items)
        if not own:
            others.append(job)
        elif not job.future.done():
            job.future.set_exception(nan_outputs(own, len(job.items), "the request's inputs"))
    return others


def _fail_all(live: list[_Job], exc: Exception) -> None:
    """Fail every request of ``live`` not yet answered with ``exc``."""
    for job in live:
        if not job.future.done():
            job.future.set_exception(exc)
