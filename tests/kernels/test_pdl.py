"""PDL gating: never on in the interpreter or off-GPU, and the launch keyword only when on."""

from __future__ import annotations

import torch
from bubblescope.kernels import _pdl


def test_pdl_off_in_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _pdl.is_interpreting()
    assert not _pdl.resolve_pdl(True, torch.device("cuda", 0))


def test_pdl_off_on_cpu_and_when_not_asked(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not _pdl.is_interpreting()
    assert not _pdl.resolve_pdl(True, torch.device("cpu"))
    assert not _pdl.resolve_pdl(False, torch.device("cpu"))


def test_launch_options():
    assert _pdl.launch_options(True) == {"launch_pdl": True}
    assert _pdl.launch_options(False) == {}
