"""What systemd's accounting reads off a running unit's cgroup: memory, CPU time, tasks.

Plausible rather than measured: a vLLM server's memory is its processes' resident memory
plus the page cache of the weights it reads (which the cgroup is charged for), growing while
the model loads, with a short peak while the engine profiles; CPU time runs at several cores
while loading and a fraction of one while serving. All of it is a function of the run's own
timestamps, so reading it costs nothing and two reads agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .units import EARLY_FAILURES

if TYPE_CHECKING:
    from .units import Run

MIB = 1024 * 1024
GIB = 1024 * MIB
_API_SERVER = 1900 * MIB
_ENGINE_CORE = 1100 * MIB
_WORKER = 3400 * MIB
_PAGE_CACHE_SHARE = 0.25  # of the weights read, still cached once loaded
_PROFILE_PEAK = 1500 * MIB  # per worker, while the engine profiles (80-100 % of the load)
_LOAD_CORES = 7.5
_SERVE_CORES = 0.4
_PER_REQUEST = 8 * MIB


def load_fraction(run: Run, now: float) -> float:
    """How far the model load has come, 0..1 (a doomed run stops where it dies)."""
    end = run.ready_at if run.ready_at is not None else run.fail_at
    if end is None:
        return 1.0
    span = max(end - run.started_mono, 1e-6)
    return min(1.0, max(0.0, (now - run.started_mono) / span))


def _small(run: Run) -> bool:
    """A process that is not a loading engine: some other program, or a start that failed
    before any worker (a bad command line, a port in use)."""
    engine = run.engine
    return engine is None or run.failure in EARLY_FAILURES or engine.exit_status is not None


def memory_bytes(run: Run, now: float, inflight: int = 0) -> tuple[int, int]:
    """(MemoryCurrent, MemoryPeak) of the unit's cgroup."""
    if run.engine is None:
        return 1 * MIB, 1 * MIB
    if _small(run):
        return 420 * MIB, 430 * MIB
    engine = run.engine
    if run.core_died_at is not None:  # only the API server is left
        return _API_SERVER, _API_SERVER + _ENGINE_CORE + _WORKER * max(1, len(run.gpus))
    workers = max(1, len(run.gpus))
    base = _API_SERVER + _ENGINE_CORE * engine.data_parallel_size + _WORKER * workers
    weights = run.weights_mib * MIB * workers
    f = load_fraction(run, now)
    cache = int(weights * _PAGE_CACHE_SHARE * f)
    profiling = _PROFILE_PEAK * workers if 0.8 <= f < 1.0 else 0
    current = base + cache + profiling + (_PER_REQUEST * inflight if f >= 1.0 else 0)
    peak = base + cache + (_PROFILE_PEAK * workers if f >= 0.8 else 0)
    return current, max(peak, current)


def cpu_nsec(run: Run, now: float) -> int:
    """CPUUsageNSec: several cores while loading, a fraction of one while serving."""
    elapsed = max(0.0, now - run.started_mono)
    if _small(run):
        return int(min(elapsed, 3.0) * 0.9e9)
    end = run.ready_at if run.ready_at is not None else run.fail_at
    loading = elapsed if end is None else min(elapsed, max(0.0, end - run.started_mono))
    serving = elapsed - loading
    return int((loading * _LOAD_CORES + serving * _SERVE_CORES) * 1e9)


def tasks(run: Run) -> int:
    """TasksCurrent: threads of the API server, each EngineCore and each GPU worker."""
    if run.engine is None:
        return 1
    if _small(run):
        return 9
    if run.core_died_at is not None:
        return 58
    return 58 + 37 * run.engine.data_parallel_size + 109 * len(run.gpus)
