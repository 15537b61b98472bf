"""`--workload my_workload:make_workload` from the folder that holds `my_workload.py` (issue 16 §5): the
`bubblescope` console script does not put the working folder on sys.path, so the loader looks there too,
and a module found nowhere says to set PYTHONPATH."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bubblescope.errors import ConfigError
from bubblescope.workload import load_workload_factory

MODULE = "bs_issue16_folder_workload"


def test_module_in_the_working_folder_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / f"{MODULE}.py").write_text("def make_workload():\n    return 'made here'\n")
    monkeypatch.chdir(tmp_path)
    # As under the console script: neither '' nor the folder itself on sys.path.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    assert load_workload_factory(f"{MODULE}:make_workload")() == "made here"
    monkeypatch.delitem(sys.modules, MODULE, raising=False)


def test_module_found_nowhere_says_to_set_pythonpath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    with pytest.raises(ConfigError, match="PYTHONPATH") as caught:
        load_workload_factory("bs_issue16_nowhere:make_workload")
    assert "\n" not in str(caught.value)
    assert sys.path == before


def test_a_broken_import_inside_the_module_is_not_blamed_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / f"{MODULE}_broken.py").write_text("import bs_issue16_missing_dependency\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, f"{MODULE}_broken", raising=False)
    with pytest.raises(ConfigError, match="bs_issue16_missing_dependency") as caught:
        load_workload_factory(f"{MODULE}_broken:make_workload")
    assert "PYTHONPATH" not in str(caught.value)
