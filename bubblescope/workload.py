"""The workload protocol (ARCHITECTURE §2): what `bubblescope run` and `ablate` drive.

A workload is any object with these members. The reference Ling-3.0-flash decoder implements it, and
`bubblescope run --workload package.module:factory` runs a user's own. This module never imports torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from bubblescope.errors import ConfigError


@dataclass(frozen=True)
class SwitchInfo:
    """One optimization switch a workload offers.

    Attributes:
        name: identifier used on the command line (`--toggles name`).
        help: one line for a user.
        replaces: what the switch removes when on (the baseline behaviour it replaces).
        needs_gpu: True when the switch only exists on a CUDA device; on CPU it is reported unavailable.
    """

    name: str
    help: str
    replaces: str = ""
    needs_gpu: bool = False


@runtime_checkable
class Workload(Protocol):
    """A decode loop whose optimizations can be switched on and off.

    `prepare(enabled)` rebuilds only what the switches change (never the weights); `step()` runs one
    decode step exactly as a serving loop would, host work included, and returns the number of tokens
    it emitted; `bytes_per_token(enabled)` is the HBM traffic per emitted token used for the floor.

    Optional: `kernel_bytes(enabled)` returns the bytes each kernel family of one step must read, as
    rules `[{family, kernels: [name prefix, ...], grid_x: int | None, bytes_per_step, launches}]`; with
    it every run's report shows achieved TB/s per kernel and where the step's time goes against the
    floor (`bubblescope/floor/kernel_bandwidth.py`; the reference decoder's rules:
    reference_model/kernel_bytes.py).
    """

    name: str

    def switches(self) -> list[SwitchInfo]: ...

    def prepare(self, enabled: frozenset[str]) -> None: ...

    def step(self) -> int: ...

    def bytes_per_token(self, enabled: frozenset[str]) -> int: ...


def parse_toggles(
    text: str | None, available: Iterable[SwitchInfo], *, all_on: bool = False
) -> frozenset[str]:
    """Turn `--toggles a,b` (or `--all`) into a set of switch names, rejecting unknown ones.

    Raises:
        ConfigError: naming the unknown switches and listing the valid ones.
    """
    valid = [info.name for info in available]
    if all_on:
        return frozenset(valid)
    if not text:
        return frozenset()
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in valid]
    if unknown:
        listing = ", ".join(valid) if valid else "(this workload has no switches yet)"
        raise ConfigError(f"unknown switch {', '.join(unknown)}; valid switches: {listing}")
    return frozenset(names)


def load_workload_factory(spec: str) -> Any:
    """Resolve `package.module:factory` to the callable, with a one-line error when it is not there."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--workload must look like package.module:factory, got {spec!r}")
    try:
        module = _import_workload_module(module_name)
    except ImportError as exc:
        hint = ""
        if getattr(exc, "name", None) == module_name.split(".")[0]:
            hint = " (put the folder that holds it on PYTHONPATH, or run from that folder)"
        raise ConfigError(f"cannot import workload module {module_name!r}: {exc}{hint}") from None
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise ConfigError(f"{module_name!r} has no callable {attr!r}")
    return factory


def _import_workload_module(module_name: str) -> Any:
    """Import `module_name`, also from the current folder: the `bubblescope` console script puts its
    own bin folder first on sys.path, not the working folder as `python -m` does, so a workload file
    beside the user (the README's `my_workload.py`) was not found without PYTHONPATH."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        if exc.name != module_name.split(".")[0] or cwd in sys.path:
            raise
        sys.path.append(cwd)
        try:
            return importlib.import_module(module_name)
        except ImportError:
            sys.path.remove(cwd)
            raise
