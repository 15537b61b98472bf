"""One error family: the CLI turns any BubblescopeError into a one-line message and exit code 2."""


class BubblescopeError(Exception):
    """Base of every error a user can cause (bad input, bad option, machine too small)."""

    exit_code = 2


class TraceError(BubblescopeError):
    """A trace file that is missing, malformed, truncated, too large or not a trace."""


class RecordError(BubblescopeError):
    """A RunRecord or ablation directory that is missing, malformed or of another schema."""


class ConfigError(BubblescopeError):
    """An unknown preset, switch, workload or an incompatible combination of options."""


class CheckpointError(BubblescopeError):
    """A checkpoint with missing, unexpected or wrongly shaped tensors, or not safetensors."""


class InsufficientMemoryError(BubblescopeError):
    """The chosen preset does not fit the device; the message names one that does."""
