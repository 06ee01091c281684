"""The engine loop of each serving vLLM process: requests batched and paced in (scaled) time.

Every request that reaches a simulated server, through the host's `curl` or through the
streaming HTTP server, becomes a `Sequence` in its run's `Batcher`: concurrent requests on one
server form one batch, so each one's tokens come as fast as the batch allows
(`simulator.perf`, `simulator.scheduler`). A step of S simulated seconds takes S * time_scale
real ones. Steps are scheduled against deadlines rather than slept one after another, so the
event loop's timer slack does not add up over a long generation.

Engines live on the fleet's event loop thread, like the machines; one is created when its run
first gets a request and its loop task ends when the run has nothing left to do. When the run
stops serving (the unit stopped, restarted or crashed) its sequences are aborted. When its
engine core died under a live API server (the `engine_core_died` fault) nothing steps: its
requests wait, and hang, until the engine comes back or the run ends.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import perf, scheduler

if TYPE_CHECKING:
    from .state import Machine, Run

# Falling further behind than this (real seconds) resets the schedule instead of catching up.
_MAX_LAG_S = 0.05
_STALLED_POLL_S = 0.2  # how often (real seconds) a dead engine core is looked at again


class Stream:
    """One request's progress as its consumer sees it."""

    def __init__(self, seq: scheduler.Sequence) -> None:
        self.seq = seq
        self.changed = asyncio.Event()
        self.finished = False
        self.aborted = False

    @property
    def generated(self) -> int:
        return self.seq.generated

    async def wait(self) -> None:
        """Until a token more, the end, or the abort."""
        await self.changed.wait()
        self.changed.clear()


class Engine:
    """One run's scheduler, stepping while it has sequences."""

    def __init__(self, machine: Machine, run: Run, alive: Callable[[], bool]) -> None:
        engine = run.engine
        assert engine is not None
        model_dir = machine.model_dir(engine.model_path) or engine.model_path
        model = perf.profile_for(model_dir, machine.disk.get(model_dir))
        step_time = scheduler.step_time_for(
            model,
            tp=engine.tensor_parallel_size,
            eager=engine.enforce_eager,
            interconnect=machine.hardware.interconnect,
            bandwidth=machine.hardware.memory_bandwidth,
        )
        self.batcher = scheduler.Batcher(
            step_time,
            max_num_seqs=engine.max_num_seqs or scheduler.MAX_NUM_SEQS,
            max_batched_tokens=engine.max_num_batched_tokens or scheduler.MAX_BATCHED_TOKENS,
        )
        self.time_scale = machine.time_scale  # no reference to the machine: see _ENGINES
        self.alive = alive
        self.stalled = lambda: run.core_died_at is not None
        self.streams: dict[scheduler.Sequence, Stream] = {}
        self._task: asyncio.Task[None] | None = None
        self._deadline = 0.0  # loop time the current step ends

    def __len__(self) -> int:
        return len(self.streams)

    def submit(self, prompt_tokens: int, max_tokens: int) -> Stream:
        seq = scheduler.Sequence(max(1, prompt_tokens), max(1, max_tokens))
        stream = Stream(seq)
        self.streams[seq] = stream
        self.batcher.add(seq)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return stream

    def cancel(self, stream: Stream) -> None:
        """The client went away: the engine stops generating for it."""
        if self.streams.pop(stream.seq, None) is not None:
            self.batcher.remove(stream.seq)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        self._deadline = loop.time()  # it was idle: the first step starts now
        while True:
            if not self.alive():
                self._abort_all()
                return
            if self.stalled():  # no engine core: nothing is scheduled, nothing answers
                await asyncio.sleep(_STALLED_POLL_S)
                self._deadline = loop.time()
                continue
            step = self.batcher.plan()
            if step is None:
                return
            now = loop.time()
            # A step starts where the last one was due to end (catching up on timer slack),
            # unless the loop fell far behind.
            start = self._deadline if now - self._deadline <= _MAX_LAG_S else now
            self._deadline = start + step.seconds * self.time_scale
            await asyncio.sleep(max(0.0, self._deadline - loop.time()))
            if not self.alive():
                self._abort_all()
                return
            finished = set(self.batcher.commit(step))
            for seq in step.advanced:
                stream = self.streams.get(seq)
                if stream is None:
                    continue
                if seq in finished:
                    stream.finished = True
                    del self.streams[seq]
                stream.changed.set()

    def _abort_all(self) -> None:
        for seq, stream in list(self.streams.items()):
            self.batcher.remove(seq)
            stream.aborted = True
            stream.changed.set()
        self.streams.clear()


# machine -> (unit name, pid, start) -> its run's engine. Weak, and the engines hold the machine
# only weakly, so a stopped fleet's machines go away with their engines.
_ENGINES: weakref.WeakKeyDictionary[Machine, dict[tuple[str, int, float], Engine]] = (
    weakref.WeakKeyDictionary()
)


def engine_for(machine: Machine, unit_name: str, run: Run) -> Engine:
    """The engine of the run now serving as `unit_name` (made on first use)."""
    engines = _ENGINES.setdefault(machine, {})
    key = (unit_name, run.pid, run.started_mono)
    engine = engines.get(key)
    if engine is None:
        for old in [k for k, e in engines.items() if k[0] == unit_name and not len(e)]:
            del engines[old]  # an earlier run of the unit, with nothing left in flight
        machine_ref = weakref.ref(machine)

        def alive() -> bool:
            host = machine_ref()
            unit = host.units.get(unit_name) if host is not None else None
            return (
                host is not None
                and unit is not None
                and unit.run is run
                and run.serving(host.clock())
            )

        engine = engines[key] = Engine(machine, run, alive)
    return engine


def running_requests(machine: Machine, run: Run) -> int:
    """Requests the run's engine holds now (for /metrics)."""
    engines = _ENGINES.get(machine, {})
    return sum(len(e) for k, e in engines.items() if k[1] == run.pid)


async def generate(machine: Machine, unit_name: str, run: Run, prompt: int, tokens: int) -> bool:
    """Wait while the run's engine generates `tokens` tokens; False if it was aborted."""
    engine = engine_for(machine, unit_name, run)
    stream = engine.submit(prompt, tokens)
    try:
        while not (stream.finished or stream.aborted):
            await stream.wait()
    except asyncio.CancelledError:
        engine.cancel(stream)
        raise
    return stream.finished
