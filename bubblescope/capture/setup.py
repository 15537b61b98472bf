"""Build the workload a run drives: pick the preset the machine holds, check switches are usable."""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, fields
from typing import Any

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo, load_workload_factory

REFERENCE_FACTORY = "bubblescope.reference_model.workload:make_workload"
SPEC_FACTORY = "bubblescope.reference_model.spec.workload:make_spec_workload"
SPEC_KINDS = ("dspark", "nextn")
PATHS = ("auto", "fast", "eager")
# Free GPU memory the e256 preset needs (weights ~124 GB bf16 plus caches and workspace).
E256_FREE_BYTES = 130 * 10**9


@dataclass
class BuiltWorkload:
    """A workload and how it was chosen, for the RunRecord and the console."""

    workload: Any
    factory: str
    preset: str | None
    notice: str | None


def choose_reference_preset() -> tuple[str, str | None]:
    """The largest reference preset this machine holds, and a notice saying why when it is not obvious."""
    import torch

    if not torch.cuda.is_available():
        return "debug", "no CUDA device: running the tiny debug preset on CPU"
    free_bytes, _total = torch.cuda.mem_get_info()
    if free_bytes >= E256_FREE_BYTES:
        return "ling3-flash-e256", None
    return "ling3-tiny", (
        f"{free_bytes / 1e9:.0f} GB free on the GPU, ling3-flash-e256 needs "
        f"~{E256_FREE_BYTES / 1e9:.0f} GB: running ling3-tiny"
    )


def _call_factory(factory: Any, options: dict[str, Any]) -> Any:
    """Call a factory with the options its signature accepts (user factories may take fewer)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory(**options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return factory(**options)
    return factory(**{k: v for k, v in options.items() if k in params})


@dataclass(frozen=True)
class ReferenceOptions:
    """Options of the reference Ling-3.0 workload that `run` and `ablate` expose.

    Attributes:
        spec: None for plain decoding, or a draft kind ("dspark", "nextn") for speculative decoding.
        block: drafted tokens per verify (speculative only).
        accept_len: oracle mean tokens emitted per verify; None = real (argmax-match) acceptance.
        path: "fast" (Triton + CUDA graph), "eager" (plain PyTorch, the stock-eager reference) or "auto".
        routing_overlap: verify-routing correlation knob (speculative only; reference_model/spec/routing.py).
    """

    spec: str | None = None
    block: int = 8
    accept_len: float | None = None
    path: str = "auto"
    routing_overlap: float = 0.0

    @classmethod
    def of(cls, source: Any) -> ReferenceOptions:
        """The options carried by anything with the same attribute names (a TP run or ablate request)."""
        return cls(**{f.name: getattr(source, f.name) for f in fields(cls)})

    def identity(self, seed: int) -> dict[str, Any]:
        """What an ablation resume must match besides factory and preset: these options and the seed."""
        return {"seed": seed, **asdict(self)}

    def check(self, user_workload: str | None) -> None:
        if self.spec is not None and self.spec not in SPEC_KINDS:
            raise ConfigError(f"unknown --spec {self.spec!r}; valid: {', '.join(SPEC_KINDS)}")
        if self.path not in PATHS:
            raise ConfigError(f"unknown --path {self.path!r}; valid: {', '.join(PATHS)}")
        if self.spec is None and (self.accept_len is not None or self.block != 8 or self.routing_overlap):
            raise ConfigError("--block, --accept-len and --routing-overlap need --spec dspark|nextn")
        if not 0.0 <= self.routing_overlap <= 1.0:
            raise ConfigError(f"--routing-overlap must be in [0, 1], got {self.routing_overlap}")
        if self.spec is not None and self.path == "eager":
            raise ConfigError("--spec runs on its own verify path; drop --path eager")
        customised = self.spec is not None or self.path != "auto"
        if user_workload is not None and customised:
            raise ConfigError("--spec and --path apply to the reference workload, not to --workload")

    def factory_and_options(self) -> tuple[str, dict[str, Any]]:
        if self.spec is None:
            return REFERENCE_FACTORY, ({"path": self.path} if self.path != "auto" else {})
        options = {"spec": self.spec, "block": self.block, "accept_len": self.accept_len}
        if self.routing_overlap:
            options["routing_overlap"] = self.routing_overlap
        return SPEC_FACTORY, options


def build_workload(
    spec: str | None,
    preset: str | None,
    *,
    seed: int = 0,
    max_steps: int | None = None,
    reference: ReferenceOptions | None = None,
) -> BuiltWorkload:
    """Resolve `--workload` / `--preset` into a constructed workload.

    Args:
        spec: `package.module:factory`, or None for the reference Ling-3.0 workload.
        preset: a preset name; None picks the best for this machine (reference workload only).
        seed: weight seed.
        max_steps: decode steps a repeat needs (warmup + timed), passed when the factory takes it.
        reference: speculative-decoding / path options of the reference workload.
    """
    reference = reference or ReferenceOptions()
    reference.check(spec)
    extra: dict[str, Any] = {}
    factory_spec = spec or REFERENCE_FACTORY
    if spec is None:
        factory_spec, extra = reference.factory_and_options()
    notice = None
    if spec is None and preset is None:
        preset, notice = choose_reference_preset()
    try:
        factory = load_workload_factory(factory_spec)
    except ConfigError:
        if spec is None:
            raise ConfigError(
                "the reference workload is not installed yet; pass --workload "
                "bubblescope.examples.toy_workload:make_workload"
            ) from None
        raise
    options: dict[str, Any] = {"preset": preset, "seed": seed, **extra}
    if max_steps is not None:
        options["max_steps"] = max(4096, max_steps)
    workload = _call_factory(factory, options)
    for member in ("switches", "prepare", "step"):
        if not callable(getattr(workload, member, None)):
            raise ConfigError(
                f"{factory_spec} returned an object without {member}(); see the Workload protocol"
            )
    return BuiltWorkload(workload, factory_spec, preset, notice)


def workload_on_cuda(workload: Any) -> bool:
    return str(getattr(workload, "device", "cpu")).startswith("cuda")


def check_usable(enabled: frozenset[str], infos: list[SwitchInfo], on_cuda: bool) -> None:
    """Refuse switches that need a GPU on a CPU run, naming them and the usable ones."""
    if on_cuda:
        return
    needs_gpu = sorted(info.name for info in infos if info.needs_gpu and info.name in enabled)
    if needs_gpu:
        usable = ", ".join(info.name for info in infos if not info.needs_gpu) or "(none)"
        raise ConfigError(
            f"switch {', '.join(needs_gpu)} needs a CUDA device and this run is on CPU; usable here: {usable}"
        )


def usable_switches(infos: list[SwitchInfo], on_cuda: bool) -> list[str]:
    return [info.name for info in infos if on_cuda or not info.needs_gpu]


def switches_block(enabled: frozenset[str], infos: list[SwitchInfo], on_cuda: bool) -> dict[str, Any]:
    """The `switches` block of a RunRecord."""
    return {
        "enabled": sorted(enabled),
        "available": [
            {
                "name": i.name,
                "help": i.help,
                "replaces": i.replaces,
                "needs_gpu": i.needs_gpu,
                "usable": on_cuda or not i.needs_gpu,
            }
            for i in infos
        ],
    }


def resolve_toggles(toggle: str | None, all_on: bool, workload: Any) -> tuple[frozenset[str], list[str]]:
    """`--toggle`/`--all` → enabled switches; GPU-only switches are refused on CPU (or left out of --all)."""
    from bubblescope.workload import parse_toggles

    if toggle and all_on:
        raise ConfigError("use either --toggles or --all, not both")
    infos = workload.switches()
    on_cuda = workload_on_cuda(workload)
    notices = []
    if all_on:
        usable = usable_switches(infos, on_cuda)
        skipped = [i.name for i in infos if i.name not in usable]
        if skipped:
            notices.append(f"--all on CPU leaves out switches that need a GPU: {', '.join(skipped)}")
        return frozenset(usable), notices
    enabled = parse_toggles(toggle, infos)
    check_usable(enabled, infos, on_cuda)
    return enabled, notices
