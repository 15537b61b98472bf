"""Short names and categories of GPU kernels, for tables a person reads (the full name stays in JSON).

Kernel names in traces are demangled C++ (`void at::native::vectorized_elementwise_kernel<4,
at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int, ...)`, up to 3,000 characters),
mangled C++ (`_ZN4vllm18act_and_mul_kernelI...`), Triton (`triton_red_fused_..._0`) or library
identifiers (`sm90_xmma_gemm_...`, `Cijk_Alik_Bljk_...`, 450 characters). `short_kernel_name`:

1. Mangled `_ZN...`: the length-prefixed components of the nested name (`vllm::act_and_mul_kernel`).
2. Demangled C++: drop the return type, the parameter list and every template argument list; keep
   the function's name and, when its namespace is not a generic one (`at`, `native`, `std`, ...), the
   innermost namespace (`vllm::fused_add_rms_norm_kernel`, `cudnn::bn_fw_tr_1C11_kernel_NCHW`). When
   the function is a generic launcher (`vectorized_elementwise_kernel`, `reduce_kernel`,
   `cutlass::device_kernel`, ...), the first specific identifier inside its template arguments is
   what tells two launches apart, and is kept in angle brackets:
   `vectorized_elementwise_kernel<AddFunctor>`, `elementwise_kernel<direct_copy_kernel_cuda>`; cutlass'
   `Kernel`, `Kernel2` and `device_kernel` say nothing, so the inner name stands alone
   (`FlashAttnFwdSm90`, `cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8`).
3. Any other name (Triton, cuBLAS, Tensile): kept whole up to NAME_CHARS characters, else cut at an
   underscore and marked with `…` (Tensile's `Cijk_...` keeps its macro tile `MT192x16x128`).

`kernel_category` sorts a kernel into one of CATEGORIES by ordered substring rules on its lower-cased
full name (the first rule that matches wins; see CATEGORY_RULES): Triton RMSNorm reductions are norm,
then communication, MoE, KV-cache writes (copy), attention, norm, GEMM, copy, reductions (other),
elementwise, else other. Both are pure functions of the name; `short_kernel_names` maps each distinct
name once and numbers colliding short names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CATEGORIES = ("GEMM", "attention", "MoE", "norm", "elementwise", "copy", "communication", "other")
# A short name longer than this is cut (at an underscore when there is one near the end).
NAME_CHARS = 64
# Namespaces that say nothing about what a kernel does.
_GENERIC_NAMESPACES = {
    "at",
    "native",
    "detail",
    "std",
    "c10",
    "cuda",
    "anonymous",
    "namespace",
    "(anonymous namespace)",
    "void",
    "torch",
    "headeronly",
    "cute",
    "cutlass",
    "_GLOBAL__N_1",
}
# Launchers whose name is the same for thousands of different kernels: the template says which.
_GENERIC_LAUNCHERS = {
    "elementwise_kernel",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel_manual_unroll",
    "unrolled_elementwise_kernel_for_multi_outputs",
    "reduce_kernel",
    "device_kernel",
    "Kernel",
    "Kernel2",
    "multi_tensor_apply_kernel",
    "index_elementwise_kernel",
}
# Launchers named after nothing but the kernel they run: the short name is that kernel's.
_BARE_LAUNCHERS = {"Kernel", "Kernel2", "device_kernel"}
# Identifiers inside template arguments that are plumbing, types or wrappers, never the distinguishing one.
_TEMPLATE_NOISE = _GENERIC_NAMESPACES | {
    "Array",
    "array",
    "char",
    "int",
    "long",
    "unsigned",
    "float",
    "double",
    "bool",
    "half",
    "Half",
    "BFloat16",
    "bfloat16_t",
    "__nv_bfloat16",
    "__hip_bfloat16",
    "float2",
    "short",
    "true",
    "false",
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
    "BinaryFunctor",
    "AUnaryFunctor",
    "BUnaryFunctor",
    "binary_internal",
    "func_wrapper_t",
    "ReduceOp",
    "enable_sm90_or_later",
    "flash",
    "TensorListMetadata",
    "TrivialOffsetCalculator",
    "OffsetCalculator",
    "memory",
    "LoadWithCast",
    "StoreWithCast",
    "TensorIteratorBase",
    "TensorIterator",
    "lambda",
    "operator",
    "const",
    "ul",
    "arch",
    "Sm90",
    "Sm80",
    "tuple",
    "C",
}
# A (possibly qualified) identifier; the last component is the one that names something.
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*")
_MANGLED_PART_RE = re.compile(r"(\d+)")
# `name(params)` with no space before the parenthesis: a C++ signature (`Memcpy DtoH (...)` is not one).
_CALL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\(")

# (category, substrings of the lower-cased full name): the first rule with a match wins. Order matters:
# a fused MoE GEMM is MoE, a Triton RMSNorm that casts (`..._to_copy_..._rsqrt`) is norm, a GEMM with a
# ReLU epilogue is GEMM, a dtype cast run by `elementwise_kernel` is copy.
CATEGORY_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "communication",
        (
            "nccl",
            "rccl",
            "cross_device_reduce",
            "all_reduce",
            "allreduce",
            "all_gather",
            "allgather",
            "reduce_scatter",
            "reducescatter",
            "alltoall",
            "all_to_all",
            "sendrecv",
            "multimem",
        ),
    ),
    # `gate_up_kernel` / `down_kernel`: the reference model's expert kernels (kernels/moe/).
    ("MoE", ("moe", "expert", "router", "routing", "topk_gating", "gate_up_kernel", "down_kernel")),
    # vLLM's KV-cache write is named after the attention backend it feeds, but it only copies.
    ("copy", ("reshape_and_cache",)),
    ("attention", ("attn", "attention", "fmha", "flash", "mla_", "kda_", "sdpa")),
    (
        "norm",
        ("rms_norm", "rmsnorm", "layer_norm", "layernorm", "batch_norm", "group_norm", "bn_fw", "bn_bw"),
    ),
    (
        "GEMM",
        (
            "gemm",
            "gemv",
            "matmul",
            "bmm_",
            # The reference model's split LM-head GEMV (`lm_head_partial_kernel`).
            "lm_head",
            "xmma",
            "cijk_",
            "nvjet",
            "cublas",
            "splitkreduce",
            "wgmma",
            "cutlass_",
            # cuDNN's implicit-GEMM convolutions.
            "scudnn",
        ),
    ),
    ("copy", ("memcpy", "memset", "copy", "transpose", "catarray", "_cat_")),
    # Reductions (sum, mean, max) are neither elementwise nor a category of their own.
    ("other", ("reduce_kernel",)),
    (
        "elementwise",
        (
            "elementwise",
            "triton_poi",
            "functor",
            "act_and_mul",
            "silu",
            "gelu",
            "relu",
            "sigmoid",
            "tanh",
            "threshold",
            "fill",
            "clamp",
        ),
    ),
)
# Triton's reductions that are RMSNorm by their fused op list (`triton_red_fused_..._mean_..._rsqrt_N`).
_TRITON_NORM_RE = re.compile(r"^triton_(red|per)_fused_.*mean.*rsqrt")


def short_kernel_name(name: str) -> str:
    """A kernel's name as a table shows it (module docstring); the full name where nothing is shorter."""
    text = name.strip()
    if text.startswith("_Z"):
        demangled = _mangled_nested_name(text)
        if demangled:
            return _cut(demangled)
    if "<" in text or "::" in text or _CALL_RE.match(text):
        return _cut(_cpp_short_name(text))
    return _cut(text)


def kernel_category(name: str) -> str:
    """One of CATEGORIES for a kernel's full name (rules: CATEGORY_RULES, first match wins)."""
    # `fbgemm_gpu::` (embedding and quantisation kernels) is a namespace, not a GEMM.
    # `flashinfer::` holds sampling and quantisation kernels besides attention: its namespace alone says
    # nothing, the kernel's own name (`...attention...`, `...decode...`) does.
    lowered = name.lower().replace("fbgemm", "").replace("flashinfer::", "")
    if _TRITON_NORM_RE.search(lowered):
        return "norm"
    for category, needles in CATEGORY_RULES:
        if any(needle in lowered for needle in needles):
            return category
    return "other"


def short_kernel_names(names: Iterable[str]) -> dict[str, str]:
    """Full name -> short name, each distinct name once; names that would collide get ` #2`, ` #3`
    in the order given (so the larger kernel, listed first, keeps the plain short name)."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for name in names:
        if name in out:
            continue
        short = short_kernel_name(name)
        seen[short] = seen.get(short, 0) + 1
        out[name] = short if seen[short] == 1 else f"{short} #{seen[short]}"
    return out


def _cut(text: str) -> str:
    if len(text) <= NAME_CHARS:
        return text
    if text.startswith("Cijk_"):
        tile = re.search(r"_MT\d+x\d+x\d+", text)
        if tile and tile.end() <= NAME_CHARS:
            return text[: tile.end()] + "…"
    cut = text.rfind("_", NAME_CHARS // 2, NAME_CHARS)
    return text[: cut if cut > 0 else NAME_CHARS - 1] + "…"


def _mangled_nested_name(text: str) -> str:
    """`_ZN4vllm18act_and_mul_kernelI...` -> `vllm::act_and_mul_kernel` (Itanium nested or plain name)."""
    pos = 3 if text.startswith("_ZN") else 2
    parts = []
    while pos < len(text) and text[pos].isdigit():
        match = _MANGLED_PART_RE.match(text, pos)
        assert match is not None
        length, pos = int(match.group(1)), match.end()
        parts.append(text[pos : pos + length])
        pos += length
    parts = [p for p in parts if p and p not in _GENERIC_NAMESPACES]
    return "::".join(parts[-2:])


def _top_level(text: str) -> tuple[str, str]:
    """Split `ret ns::f<tmpl>(params)` into (`ret ns::f`, `tmpl`): the text outside every bracket up to
    the parameter list, and the last top-level template argument list before it (the function's)."""
    depth, head, templates = 0, [], []
    for index, char in enumerate(text):
        if char in "<([{":
            # The parameter list ends the name; a name's own `(anonymous namespace)` is followed by `::`.
            if depth == 0 and char == "(" and not text.startswith("anonymous namespace)", index + 1):
                break
            if depth == 0 and char == "<":
                templates.append([])
            depth += 1
        elif char in ">)]}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            head.append(char)
        if depth > 0 and templates and not (depth == 1 and char in "<"):
            templates[-1].append(char)
    return "".join(head), "".join(templates[-1]) if templates else ""


def _cpp_short_name(text: str) -> str:
    head, template = _top_level(text)
    # The return type (`void `, `std::enable_if<...>::type `) ends at the last space outside brackets.
    qualified = head.strip().split(" ")[-1] if head.strip() else text
    parts = [p for p in qualified.split("::") if p]
    if not parts:
        return text
    function = parts[-1]
    namespaces = [p for p in parts[:-1] if p not in _GENERIC_NAMESPACES]
    short = f"{namespaces[-1]}::{function}" if namespaces else function
    if function in _GENERIC_LAUNCHERS:
        words = (w.split("::")[-1] for w in _IDENT_RE.findall(template))
        inner = next((w for w in words if w not in _TEMPLATE_NOISE), None)
        if inner:
            # cutlass' `Kernel2<cutlass_80_tensorop_..._gemm_...>`: the launcher's name adds nothing.
            short = inner if function in _BARE_LAUNCHERS else f"{function}<{inner}>"
    return short
