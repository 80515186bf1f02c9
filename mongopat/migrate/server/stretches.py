"""The in-server pass over stretches of ``_id``, a thread each, so that more of the deployment works at once:

- a collection sharded on a range of ``_id`` whose chunks lie on several shards: a thread per shard, taking
  the stretches its chunks hold (``sharding.shard_breaks``), so the shards work at once while each command
  of a range still goes to one of them (``--workers`` caps the threads);
- otherwise, with ``--workers N`` (N > 1): N stretches of about as many pending documents each, a thread
  each, so the server computes N ranges at once on as many of its cores.

Without either, the pass is one (``InServerSteps._in_server_pass``). The stretches are recorded in the
changelog (``stretches``) before the first range. Each keeps its own checkpoint (``last_id``) and its own
open range (``stashed_to``), written with the ``stretches.<n>.`` prefix, so a run stopped anywhere settles
each stretch's open range first and goes on from each checkpoint, whatever the balancer has moved since (a
stretch whose chunks moved only costs its commands a second shard). A run begun in one pass goes on in one
pass; the catch-up passes after the stretches are one pass each. Ranges never cross a stretch's bounds, so
no two threads touch one document. A thread's failure (or an interrupt) stops the others after their
current range; the first failure is raised.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from mongopat.migrate.contracts import StepRun, Stretch
from mongopat.migrate.runner import StepOutcome
from mongopat.migrate.server.id_cuts import id_cuts
from mongopat.migrate.server.in_server_steps import After, InServerSteps, pending_from, server_pending
from mongopat.migrate.server.sharding import ShardBreaks


def planned(steps: InServerSteps, run: StepRun, breaks: ShardBreaks) -> list[Stretch]:
    """The stretches of a new pass (none: one pass): a shard's each, where the chunks of a collection sharded
    on a range of ``_id`` lie on several shards and ``--workers`` is not 1; else ``--workers`` stretches of
    about as many pending documents each (none where there are fewer than two per stretch)."""
    if breaks.shards and steps.options.workers != 1:
        return [_stretch(low, high, shard) for low, high, shard in breaks.stretches()]
    workers = steps.options.workers or 1
    if workers < 2:
        return []
    collection, where = steps.db[run.step.collection], server_pending(run.step)
    pending = collection.count_documents(where)
    if pending < 2 * workers:
        return []
    edges = [None, *id_cuts(collection, where, workers, pending), None]
    return [_stretch(edges[n], edges[n + 1], f"part {n + 1}") for n in range(len(edges) - 1)]


def threads_for(stretches: list[Stretch], workers: int | None) -> int:
    """A thread per shard (or part) the stretches name, at most ``workers``."""
    names = len({stretch["shard"] for stretch in stretches})
    return max(1, min(names, workers or names))


def _stretch(low: Any, high: Any, shard: str) -> Stretch:
    return Stretch(low=low, high=high, shard=shard, last_id=None, has_last=False, stashed_to=None, done=False)


class StretchPass:
    """One pass of an in-server step over the stretches recorded in its run's state."""

    def __init__(self, steps: InServerSteps, run: StepRun, outcome: StepOutcome, total: int | None) -> None:
        self.steps, self.run, self.outcome, self.total = steps, run, outcome, total
        self.stretches: list[Stretch] = list(run.state.get("stretches") or [])
        self.lock = threading.Lock()  # the outcome, the changelog's figures, pacing and progress
        self.stop = threading.Event()

    def run_all(self, threads: int) -> None:
        """Every stretch not done, a thread per shard or part (``threads`` at most); raises a thread's
        failure."""
        by_shard: dict[str, list[int]] = {}
        for position, stretch in enumerate(self.stretches):
            by_shard.setdefault(stretch["shard"], []).append(position)
        self.outcome.stats["threads_at_once"] = threads  # (threads_for: never more than the shards or parts)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = [pool.submit(self._shard, positions) for positions in by_shard.values()]
            try:
                wait(futures)
            except BaseException:  # an interrupt here: the threads stop after their current range
                self.stop.set()
                raise
        for future in futures:
            future.result()

    def _shard(self, positions: list[int]) -> None:
        try:
            for position in positions:
                if self.stop.is_set():
                    return
                self._stretch(position)
        except BaseException:
            self.stop.set()
            raise

    def _stretch(self, position: int) -> None:
        stretch = self.stretches[position]
        if stretch["done"]:
            return
        prefix = f"stretches.{position}."
        if stretch["has_last"]:
            start = After(stretch["last_id"], True)
        else:
            start = After(stretch["low"], stretch["low"] is not None, inclusive=True)
        below = {"_id": {"$lt": stretch["high"]}} if stretch["high"] is not None else None
        stats: dict[str, Any] = {}  # this thread's counts, added to the outcome's at each checkpoint
        if (open_to := stretch["stashed_to"]) is not None:
            # Stopped inside a range: its rewritten documents still hold their originals.
            backed = self.steps._settle(self.run, start, open_to, stats, replay=True)
            self._checkpoint(prefix, stats, backed, 0, open_to)
            start = After(open_to, True)
        pending = self.steps.db[self.run.step.collection].count_documents(pending_from(self.run.step, start, below)[1])
        # Documents inserted into the stretch behind its ranges are the catch-up's, as in one pass.
        for _range in range(pending // self.steps.options.batch_size + 2):
            if self.stop.is_set():
                return
            taken = self.steps._in_server_batch(self.run, start, stats, False, below, prefix)
            if taken is None:
                break
            self._checkpoint(prefix, stats, taken.backed, taken.rewritten, taken.high)
            start = After(taken.high, True)
        self.steps.changelog.step(self.run.migration_id, self.run.index, **{prefix + "done": True})

    def _checkpoint(self, prefix: str, stats: dict[str, Any], backed: int, rewritten: int, high: Any) -> None:
        """A range of a stretch is done: the outcome's figures, the stretch's checkpoint with them (one
        changelog update), then pacing, progress and the lease, one thread at a time."""
        run, outcome = self.run, self.outcome
        with self.lock:
            outcome.read += backed
            outcome.written += rewritten
            for key, value in stats.items():
                outcome.stats[key] = outcome.stats.get(key, 0) + value
            stats.clear()
            self.steps.changelog.checkpoint(
                run.migration_id,
                run.index,
                backed,
                rewritten,
                **{prefix + "last_id": high, prefix + "has_last": True, prefix + "stashed_to": None},
                read=outcome.read,
                written=outcome.written,
                stats=outcome.stats,
            )
            self.steps.runner.after_batch(run, outcome.read, self.total)
