"""Profiles of examples/profile/toy_decode.py shared by the tests that read them back (made once)."""

from __future__ import annotations

from pathlib import Path

import pytest

TOY = Path(__file__).resolve().parents[2] / "examples" / "profile" / "toy_decode.py"


@pytest.fixture(scope="session")
def toy_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"toy": the loop's profile folder, "toy_extra": with its extra read per step} (CPU, 4 steps)."""
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    from bubblescope.cli import app

    root = tmp_path_factory.mktemp("profiles")
    for name, extra in (("toy", []), ("toy_extra", ["--extra-read"])):
        argv = ["profile", "--out", str(root / name), "--step-frame", "decode_one_token", "--warmup", "1"]
        result = CliRunner().invoke(
            app, [*argv, "--active", "4", "--", "python", str(TOY), "--tokens", "8", *extra]
        )
        assert result.exit_code == 0, result.output
    return {"toy": root / "toy", "toy_extra": root / "toy_extra"}
