"""join_within: spawned ranks that finish are joined; ranks still running at the deadline are killed."""

from __future__ import annotations

import torch.multiprocessing as mp
from bubblescope.reference_model.tp.distributed import join_within

from tests.tp.workers import sleep_worker


def test_finished_ranks_join_and_stuck_ranks_are_killed_at_the_deadline():
    done = mp.start_processes(sleep_worker, args=(0.0,), nprocs=2, start_method="spawn", join=False)
    assert join_within(done, 60)
    stuck = mp.start_processes(sleep_worker, args=(600.0,), nprocs=2, start_method="spawn", join=False)
    assert not join_within(stuck, 1)
    for process in stuck.processes:
        process.join(timeout=10)
        assert not process.is_alive()
