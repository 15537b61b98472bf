"""The package installs, maps its folders into one namespace, and the CLI answers."""

from typer.testing import CliRunner

from bubblescope.cli import app


def test_mapped_namespaces_import():
    import bubblescope.kernels
    import bubblescope.reference_model
    from bubblescope.reference_model.config import PRESETS

    assert {"ling3-flash", "ling3-flash-e256", "ling3-tiny", "debug"} <= set(PRESETS)
    assert bubblescope.kernels.__name__ == "bubblescope.kernels"


def test_cli_lists_the_product_commands():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "ablate", "analyze", "report", "gate", "floor", "presets"):
        assert command in result.output
