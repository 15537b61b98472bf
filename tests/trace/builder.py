"""Build small Kineto-shaped traces for tests, with times given in integer µs-or-ns as the test reads best.

Times passed to the builder are integer ns; they are written as µs floats with ns fractions (the
Kineto 2.x form) or, with `int_us=True`, as integer µs (older traces). Every launch gets a fresh
correlation id shared by its runtime call and GPU op(s), as CUPTI does.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

US = 1000
HOST_PID, HOST_TID = 4242, 4242
DEVICE = 0
DEFAULT_STREAM = 7


class TraceBuilder:
    """Accumulate events; `trace()` returns the JSON document, `write(path)` writes it.

    Args:
        legacy: use the old category names (Operator, Runtime, Kernel, Memcpy).
        int_us: write integer µs (times must then be multiples of 1000 ns).
        sync_rows: "stream" (cuda_sync on the stream row), "virtual" (tid stream + 1000000).
        context_stream: stream value of a Context Sync row (-1 or 4294967295).
    """

    def __init__(
        self,
        *,
        legacy: bool = False,
        int_us: bool = False,
        sync_rows: str = "stream",
        context_stream: int = -1,
        base_us: int = 1_700_000_000_000,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "test GPU"}]}
        self.legacy, self.int_us, self.sync_rows = legacy, int_us, sync_rows
        self.context_stream = context_stream
        self.base_us = base_us
        self._corr = 100
        self._py_id = 0

    def _ts(self, ns: int) -> float | int:
        if self.int_us:
            assert ns % 1000 == 0, "int_us traces need whole µs"
            return self.base_us + ns // 1000
        return round(self.base_us + ns / 1000.0, 3)

    def _dur(self, ns: int) -> float | int:
        return ns // 1000 if self.int_us else round(ns / 1000.0, 3)

    def _x(
        self, cat: str, name: str, start: int, end: int, pid: Any, tid: Any, args: dict | None = None
    ) -> dict:
        event = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": self._ts(start),
            "dur": self._dur(end - start),
        }
        if args is not None:
            event["args"] = args
        self.events.append(event)
        return event

    def next_correlation(self) -> int:
        self._corr += 1
        return self._corr

    def annotation(self, name: str, start: int, end: int) -> None:
        self._x("user_annotation", name, start, end, HOST_PID, HOST_TID, {})

    def op(self, name: str, start: int, end: int) -> None:
        self._x("Operator" if self.legacy else "cpu_op", name, start, end, HOST_PID, HOST_TID, {})

    def frame(self, name: str, start: int, end: int, parent: int | None = None) -> int:
        self._py_id += 1
        self._x(
            "python_function",
            name,
            start,
            end,
            HOST_PID,
            HOST_TID,
            {"Python id": self._py_id, "Python parent id": parent},
        )
        return self._py_id

    def runtime(self, name: str, start: int, end: int, corr: int | None = None) -> int:
        corr = self.next_correlation() if corr is None else corr
        self._x(
            "Runtime" if self.legacy else "cuda_runtime",
            name,
            start,
            end,
            HOST_PID,
            HOST_TID,
            {"correlation": corr},
        )
        return corr

    def gpu_op(
        self,
        name: str,
        start: int,
        end: int,
        corr: int,
        stream: int = DEFAULT_STREAM,
        kind: str = "kernel",
        nbytes: int = 0,
    ) -> None:
        cats = {
            "kernel": ("Kernel", "kernel"),
            "memcpy": ("Memcpy", "gpu_memcpy"),
            "memset": ("Memset", "gpu_memset"),
        }[kind]
        args = {"device": DEVICE, "stream": stream, "correlation": corr}
        if kind != "kernel":
            args["bytes"] = nbytes
        self._x(cats[0] if self.legacy else cats[1], name, start, end, DEVICE, stream, args)

    def kernel(
        self,
        name: str,
        launch: tuple[int, int],
        run: tuple[int, int],
        stream: int = DEFAULT_STREAM,
        api: str = "cudaLaunchKernel",
    ) -> int:
        corr = self.runtime(api, *launch)
        self.gpu_op(name, *run, corr=corr, stream=stream)
        return corr

    def graph_replay(
        self, launch: tuple[int, int], runs: list[tuple[int, int]], stream: int = DEFAULT_STREAM
    ) -> int:
        corr = self.runtime("cudaGraphLaunch", *launch)
        for i, run in enumerate(runs):
            self.gpu_op(f"graph_kernel_{i}", *run, corr=corr, stream=stream)
        return corr

    def wait_row(self, kind: str, start: int, end: int, corr: int, stream: int = DEFAULT_STREAM) -> None:
        if kind == "Context Sync":
            stream = self.context_stream
        tid = stream + 1_000_000 if self.sync_rows == "virtual" and stream >= 0 else stream
        self._x(
            "cuda_sync",
            kind,
            start,
            end,
            DEVICE,
            tid,
            {"cuda_sync_kind": kind, "stream": stream, "correlation": corr, "device": DEVICE},
        )

    def blocking_read(
        self,
        ops: list[str],
        host: tuple[int, int],
        copy_call: tuple[int, int],
        copy_run: tuple[int, int],
        sync_call: tuple[int, int] | None,
        memcpy_name: str = "Memcpy DtoH (Device -> Pinned)",
    ) -> None:
        """A device read: nested ATen ops over [host], a memcpyAsync, its GPU memcpy, and (when
        `sync_call`) a cudaStreamSynchronize with its Stream Sync wait row."""
        for depth, name in enumerate(ops):
            self.op(name, host[0] + depth * US, host[1] - depth * US)
        corr = self.runtime("cudaMemcpyAsync", *copy_call)
        self.gpu_op(memcpy_name, *copy_run, corr=corr, kind="memcpy", nbytes=8)
        if sync_call is not None:
            sync_corr = self.runtime("cudaStreamSynchronize", *sync_call)
            self.wait_row("Stream Sync", sync_call[0] + US, sync_call[1] - US, sync_corr)

    def device_synchronize(self, start: int, end: int) -> None:
        corr = self.runtime("cudaDeviceSynchronize", start, end)
        self.wait_row("Context Sync", start + US, end - US, corr)

    def gpu_annotation(self, name: str, start: int, end: int, stream: int = DEFAULT_STREAM) -> None:
        """A `gpu_user_annotation` range on a stream (GPU time of a record_function)."""
        self._x("gpu_user_annotation", name, start, end, DEVICE, stream, {"device": DEVICE, "stream": stream})

    def trace(self) -> dict[str, Any]:
        doc = dict(self.meta)
        doc["traceEvents"] = list(self.events) + [
            {"name": "process_name", "ph": "M", "pid": HOST_PID, "tid": 0, "args": {"name": "python3"}},
            {
                "ph": "s",
                "id": 1,
                "pid": HOST_PID,
                "tid": HOST_TID,
                "ts": self._ts(0),
                "cat": "ac2g",
                "name": "ac2g",
            },
        ]
        return doc

    def write(self, path: Path) -> Path:
        data = json.dumps(self.trace(), indent=None).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
        return path
