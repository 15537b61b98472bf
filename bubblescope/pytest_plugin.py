"""pytest plugin (entry point `pytest11`): fail a test whose code makes a blocking read.

Marker, around the whole test call (fixtures' setup and teardown are not guarded):

    @pytest.mark.no_blocking_reads                      # none allowed
    @pytest.mark.no_blocking_reads(max_per_step=1, steps=8)
    def test_decode_loop(model): ...

Reads made directly by the test file itself (its `assert torch.equal(...)`, `.item()` in a check) are
not the code under test and are not counted; reads in any other module are, however deep. Keyword
arguments are those of `bubblescope.no_new_reads`; `include_test_file=True` counts the test file's
own reads too.

Fixture, for a narrower region: `def test_step(no_new_reads): with no_new_reads(max_per_step=0): ...`
(`no_new_reads` is `bubblescope.no_new_reads`).

Loading this plugin imports neither torch nor bubblescope's analysis; a marked test imports torch.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

MARKER = "no_blocking_reads"
MARKER_HELP = (
    f"{MARKER}(max_per_step=0, *, steps=1, cuda_only=False, all_threads=True, include_test_file=False): "
    "fail the test when the code it calls makes more blocking reads (.item(), .cpu(), .tolist(), "
    "nonzero, synchronize, ...) than allowed, naming each read's file:line and op (bubblescope)"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    from bubblescope.errors import BubblescopeError
    from bubblescope.profiling.read_guard import BlockingReadError, no_new_reads

    options = dict(marker.kwargs)
    ignore = () if options.pop("include_test_file", False) else (str(item.path),)
    try:
        guard = no_new_reads(*marker.args, ignore_files=ignore, **options)
    except (BubblescopeError, TypeError) as exc:
        failure = f"@pytest.mark.{MARKER}: {exc}"
    else:
        failure = ""
        try:
            with guard:
                result = yield
        except BlockingReadError as exc:
            failure = str(exc)
    # Outside the except blocks, so the report is the message alone, not a chained traceback.
    if failure:
        pytest.fail(failure, pytrace=False)
    return result


@pytest.fixture(name="no_new_reads")
def _no_new_reads_fixture() -> Any:
    """`bubblescope.no_new_reads`, the guard as a context manager: `with no_new_reads(max_per_step=0):`."""
    from bubblescope.profiling.read_guard import no_new_reads

    return no_new_reads
