"""Analyse many rank traces at once: a process pool over this machine's cores, or a Dask cluster.

Each rank's trace is independent until the cross-rank reduce, so each worker loads and analyses whole
ranks and returns either the compact `RankResult` (the usual case: the client then holds a few MB
per rank, not its tables) or, for callers that draw the timeline or write annotated traces, the whole
`RankAnalysis`. Results come back in rank order and go through the same reduce as a serial run, so the
analysis is the same whatever ran where (tests/test_rank_pool.py checks it).

Dask (`pip install 'bubblescope[dask]'`) is imported only when asked for. Its workers must see the
trace files at the paths given (a shared filesystem, or absolute paths valid on every worker).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

from bubblescope.analysis.traces import analyze_file
from bubblescope.errors import BubblescopeError, ConfigError
from bubblescope.ranks.analysis import RankAnalysis
from bubblescope.ranks.results import RankResult, summarize_rank
from bubblescope.trace.load import expand_trace_paths
from bubblescope.trace.source import effective_cap

EXECUTORS = ("local", "dask")
# How long a client waits to reach a Dask scheduler before giving up with a one-line error.
DASK_CONNECT_TIMEOUT_S = 30

# One rank's work: (rank index, path as given, step marker, decompressed-size cap in bytes).
Task = tuple[int, str, str | None, int]
Result = TypeVar("Result")


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def rank_results(
    paths: Sequence[str | os.PathLike[str]],
    *,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
    jobs: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
) -> list[RankResult]:
    """The compact result of every rank (rank order); reduce them with `rank_reduce.reduce_results`.

    Args:
        paths: trace files or folders of them; one file per rank.
        step_marker: as `analysis.analyze_traces`.
        max_decompressed_bytes: as `analysis.analyze_traces`.
        jobs: worker processes for the local pool (default: every core; 1 runs in this process), or
            worker processes of the LocalCluster that `executor="dask"` starts without a scheduler.
        executor: "local" (a process pool on this machine) or "dask".
        scheduler: address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786); None with
            executor="dask" starts a LocalCluster.

    Raises:
        TraceError: a file is missing, malformed or too large (from whichever worker read it).
        ConfigError: a bad executor, jobs, or Dask missing or unreachable.
    """
    files = expand_trace_paths(list(paths))
    results = map_ranks(
        _rank_result, _tasks(files, step_marker, max_decompressed_bytes), jobs, executor, scheduler
    )
    results[0].warnings[:0] = files.skipped
    return results


def rank_analyses(
    paths: Sequence[str | os.PathLike[str]],
    *,
    step_marker: str | None = None,
    max_decompressed_bytes: int | None = None,
    jobs: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
) -> list[RankAnalysis]:
    """Every rank's whole analysis, tables included (as `analysis.analyze_ranks`), made by workers.
    Arguments as `rank_results`."""
    files = expand_trace_paths(list(paths))
    ranks = map_ranks(
        _rank_analysis, _tasks(files, step_marker, max_decompressed_bytes), jobs, executor, scheduler
    )
    ranks[0].warnings[:0] = files.skipped
    return ranks


def map_ranks(
    work: Callable[[Task], Result],
    tasks: list[Task],
    jobs: int | None,
    executor: str,
    scheduler: str | None,
) -> list[Result]:
    """`work` applied to every task, results in task order, on the chosen executor."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, not {jobs}")
    if scheduler is not None and executor != "dask":
        raise ConfigError("--scheduler needs --executor dask")
    workers = min(jobs or available_cores(), len(tasks))
    if executor == "dask":
        return _dask_map(work, tasks, scheduler, workers)
    if workers <= 1:
        return [work(task) for task in tasks]
    # fork where the OS has it: workers start with this process' imports (pandas, numpy) already done.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            return list(pool.map(work, tasks))
    except BrokenProcessPool:
        raise BubblescopeError(
            f"a worker process died while analysing {len(tasks)} ranks (out of memory?); "
            "try fewer workers with --jobs"
        ) from None


def _tasks(files: list[Path], step_marker: str | None, max_decompressed_bytes: int | None) -> list[Task]:
    # The cap is resolved here: a worker process does not see this process' `trace_size_cap` setting.
    cap = effective_cap(max_decompressed_bytes)
    return [(index, str(path), step_marker, cap) for index, path in enumerate(files)]


def _rank_result(task: Task) -> RankResult:
    index, path, step_marker, cap = task
    return summarize_rank(analyze_file(Path(path), index, step_marker, cap))


def _rank_analysis(task: Task) -> RankAnalysis:
    index, path, step_marker, cap = task
    return analyze_file(Path(path), index, step_marker, cap)


def _dask_map(
    work: Callable[[Task], Result], tasks: list[Task], scheduler: str | None, workers: int
) -> list[Any]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("--executor dask needs Dask distributed: pip install 'bubblescope[dask]'") from None
    cluster = None
    try:
        if scheduler is None:
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        where = f"reach the Dask scheduler {scheduler}" if scheduler else "start a local Dask cluster"
        raise ConfigError(f"cannot {where}: {exc}") from None
    try:
        # pure=False: two ranks with equal arguments are still two pieces of work.
        futures = client.map(work, tasks, pure=False)
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
