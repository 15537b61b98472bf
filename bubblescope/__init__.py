"""bubblescope: a latency profiler for batch-size-1 LLM decoding.

The analysis core (`bubblescope.trace`, `bubblescope.detect`, `bubblescope.report`, `bubblescope.gate`)
never imports torch; `bubblescope.capture` and the reference workload import it lazily.

Python API (docs/api.md): `analyze` (traces -> `AnalysisResult` with DataFrames), `load_analysis`
(an analysis.json -> the same), `profile` / `step` (profile your own loop), `no_new_reads` (fail a test
that makes a blocking read). Importing `bubblescope` imports none of pandas, torch or the analysis: each
name loads its module on first use.
"""

from importlib import import_module as _import_module
from pathlib import Path as _Path

__version__ = "0.1.0"

# Public name -> the module that defines it ("module:attribute" where the names differ), imported on first
# access (PEP 562), so the real signature and docstring are what `help(bubblescope.analyze)` shows.
_LAZY = {
    "profile": "bubblescope.profiling.session:ProfileSession",
    "step": "bubblescope.profiling.session",
    "analyze": "bubblescope.records.analysis_result",
    "load_analysis": "bubblescope.records.analysis_result",
    "AnalysisResult": "bubblescope.records.analysis_result",
    "TracesNotKeptError": "bubblescope.records.analysis_result",
    "analyze_traces": "bubblescope.analysis.traces",
    "no_new_reads": "bubblescope.profiling.read_guard",
    "BlockingReadError": "bubblescope.profiling.read_guard",
    "BlockingRead": "bubblescope.profiling.read_guard",
    "BubblescopeError": "bubblescope.errors",
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, _, attribute = _LAZY[name].partition(":")
        value = getattr(_import_module(module), attribute or name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bubblescope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# In a source checkout used through PYTHONPATH=. (the device machine, quick scripts), the mapped
# folders reference_model/ and kernels/ sit beside this package rather than inside it. Adding the
# checkout root to this package's search path makes `bubblescope.reference_model` and
# `bubblescope.kernels` resolve the same way the installed mapping does.
_checkout_root = _Path(__file__).resolve().parent.parent
if (_checkout_root / "reference_model" / "__init__.py").is_file() and not (
    _Path(__file__).resolve().parent / "reference_model"
).exists():
    __path__.append(str(_checkout_root))
