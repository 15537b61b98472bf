"""`bubblescope.no_new_reads` on CPU: counts the reads a GPU would block on, names line and op."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

import bubblescope
from bubblescope.capture.user_reads import ReadTap
from bubblescope.errors import ConfigError
from bubblescope.profiling.read_guard import BlockingReadError, no_new_reads

HERE = Path(__file__).name


def _reads_once(x: torch.Tensor) -> float:
    return x.sum().item()


ITEM_LINE = _reads_once.__code__.co_firstlineno + 1


def _clean_step(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, 0).sum()


def test_clean_code_passes() -> None:
    with no_new_reads() as guard:
        _clean_step(torch.ones(4))
    assert guard.count == 0


def test_an_item_fails_naming_line_function_and_op() -> None:
    with pytest.raises(BlockingReadError) as failure, no_new_reads():
        _reads_once(torch.ones(4))
    message = str(failure.value)
    assert f"{HERE}:{ITEM_LINE} in _reads_once: .item() x1" in message
    assert message.startswith("1 blocking read, none allowed;")


def test_each_read_op_is_named() -> None:
    x = torch.arange(4)
    with no_new_reads(max_per_step=None) as guard:
        x.tolist()
        x.cpu()
        x.to("cpu")
        torch.nonzero(x)
        bool(x[0])
        f"{x[1]}"
        x[x > 1]
        x[:, None][x > 1, 0]
        x.to(torch.float32)
        x[torch.tensor([0, 2])]
        x[1:3]
    assert [r.op for r in guard.reads] == [
        ".tolist()",
        ".cpu()",
        ".to()",
        "torch.nonzero()",
        "bool(tensor)",
        "format(tensor) / f-string",
        "x[bool_mask]",
        "x[bool_mask]",
    ]
    assert [r.kind for r in guard.reads][:4] == ["copy", "copy", "copy", "nonzero"]


def test_profiles_leave_indexing_untapped() -> None:
    # Only the guard taps x[mask]: a profile's tap must not wrap every indexing call.
    original = torch.Tensor.__getitem__
    with ReadTap(cuda_run=False):
        assert torch.Tensor.__getitem__ is original
    with no_new_reads(max_per_step=None):
        assert torch.Tensor.__getitem__ is not original
    assert torch.Tensor.__getitem__ is original


def test_max_per_step_divides_over_steps() -> None:
    x = torch.ones(2)
    with no_new_reads(max_per_step=1, steps=2) as guard:
        for _ in range(2):
            _reads_once(x)
    assert guard.count == 2
    with pytest.raises(
        BlockingReadError,
        match=r"3 blocking reads in 2 steps \(1.5 per step\), at most 1 per step \(2 in all\)",
    ):
        with no_new_reads(max_per_step=1, steps=2):
            for _ in range(3):
                _reads_once(x)


def test_nested_guards_count_their_own_region_and_the_tap_is_removed() -> None:
    original_item = torch.Tensor.item
    x = torch.ones(2)
    with no_new_reads(max_per_step=2) as outer:
        _reads_once(x)
        with pytest.raises(BlockingReadError), no_new_reads(max_per_step=0):
            _reads_once(x)
        assert torch.Tensor.item is not original_item
    assert outer.count == 2
    assert torch.Tensor.item is original_item
    _reads_once(x)  # no guard entered: nothing raises


def test_decorator_gives_each_call_its_own_count() -> None:
    @no_new_reads(max_per_step=1)
    def step(x: torch.Tensor, depth: int) -> float:
        value = _reads_once(x)
        return value + (step(x, depth - 1) if depth else 0.0)

    assert step(torch.ones(2), 0) == 2.0
    # The outer call's guard counts its own read and the recursive call's: 2 > 1.
    with pytest.raises(BlockingReadError, match="2 blocking reads"):
        step(torch.ones(2), 1)


def test_reads_from_other_threads() -> None:
    x = torch.ones(2)

    def worker() -> None:
        _reads_once(x)

    with pytest.raises(BlockingReadError, match=r"\(another thread\)"), no_new_reads():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    with no_new_reads(all_threads=False) as guard:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert guard.count == 0


def test_guards_in_two_threads_at_once() -> None:
    x = torch.ones(2)
    both_inside = threading.Barrier(2)
    counts: dict[int, int] = {}

    def guarded(reads: int) -> None:
        with no_new_reads(max_per_step=None, all_threads=False) as guard:
            both_inside.wait()
            for _ in range(reads):
                _reads_once(x)
            both_inside.wait()
        counts[reads] = guard.count

    threads = [threading.Thread(target=guarded, args=(n,)) for n in (1, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts == {1: 1, 3: 3}
    assert not hasattr(torch.Tensor.item, "__wrapped__")


def test_the_code_exception_wins_and_the_tap_is_released() -> None:
    with pytest.raises(ValueError, match="boom"), no_new_reads():
        _reads_once(torch.ones(2))
        raise ValueError("boom")
    assert not hasattr(torch.Tensor.item, "__wrapped__")


def test_ignore_files_skips_reads_made_by_those_files() -> None:
    with no_new_reads(ignore_files=[__file__]) as guard:
        _reads_once(torch.ones(2))
    assert guard.count == 0


def test_cuda_only_leaves_cpu_tensors_alone() -> None:
    with no_new_reads(cuda_only=True) as guard:
        _reads_once(torch.ones(2))
    assert guard.count == 0


def test_bad_arguments_and_conflicts_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="max_per_step"):
        no_new_reads(max_per_step=-1)
    with pytest.raises(ConfigError, match="steps"):
        no_new_reads(steps=0)
    with no_new_reads(), pytest.raises(ConfigError, match="nested guards"):
        no_new_reads(cuda_only=True).__enter__()
    with ReadTap(cuda_run=False), pytest.raises(ConfigError, match="profile or run records"):
        no_new_reads().__enter__()


def test_a_profile_inside_a_guard_is_refused_in_one_line(tmp_path: Path) -> None:
    with no_new_reads(), pytest.raises(ConfigError, match="cannot be nested"):
        bubblescope.profile(out=tmp_path, progress=False).__enter__()
    assert not hasattr(torch.Tensor.item, "__wrapped__")


def test_exported_from_the_package() -> None:
    assert bubblescope.no_new_reads is no_new_reads
    assert bubblescope.BlockingReadError is BlockingReadError
    assert issubclass(BlockingReadError, AssertionError)
