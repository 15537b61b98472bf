"""Short kernel names and categories on names taken from real public traces (../shared/data/real_traces)
and the H200 traces in tests/data: each expectation was written by reading the raw name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bubblescope.trace.kernel_names import (
    CATEGORIES,
    NAME_CHARS,
    kernel_category,
    short_kernel_name,
    short_kernel_names,
)

# (full name as in the trace, trace it comes from, short name, category)
REAL_NAMES = [
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
        "kineto_resnet50_v100_2021",
        "vectorized_elementwise_kernel<AddFunctor>",
        "elementwise",
    ),
    (
        "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
        "c10::BFloat16 const*, float, int, int)",
        "tl_vllm_eager_b200",
        "vllm::fused_add_rms_norm_kernel",
        "norm",
    ),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, "
        "vllm::Signal*, __nv_bfloat16*, int, int)",
        "tm_vllm_h100",
        "vllm::cross_device_reduce_1stage",
        "communication",
    ),
    (
        "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16ETnPFT_RKS3_EXadL_ZNS_11silu_kernelIS2_EES3_S5_EELb1EEEvPS3_PS4_i",
        "tm_vllm_h100",
        "vllm::act_and_mul_kernel",
        "elementwise",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8>"
        "(cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8::Params)",
        "tl_hf_qwen05_h100",
        "cutlass_80_tensorop_s16816gemm_bf16_128x64_64x6_tn_align8",
        "GEMM",
    ),
    (
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, "
        "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>"
        "(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
        "::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::"
        "{lambda(int)#1})",
        "tl_vllm_eager_b200",
        "elementwise_kernel<direct_copy_kernel_cuda>",
        "copy",
    ),
    (
        "void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128, 128, 256, 1>"
        "(__hip_bfloat16*, float const*, float const*, __hip_bfloat16 const*, int const*, int const*, int, "
        "float const*)",
        "tm_vllm_mi300x",
        "paged_attention_ll4mi_reduce_kernel",
        "attention",
    ),
    (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
        "(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, "
        "long, long, long, long, int, int, int, float const*, float const*)",
        "tm_vllm_h100",
        "vllm::reshape_and_cache_flash_kernel",
        "copy",
    ),
    (
        "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0",
        "tl_hf_qwen05_h100",
        "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0",
        "norm",
    ),
    ("triton_poi_fused_mul_silu_1", "tl_hf_qwen05_h100", "triton_poi_fused_mul_silu_1", "elementwise"),
    (
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "tl_resnet_ckpt_ddp_mi300x",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
        "communication",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off"
        "_kernel__5x_cublas",
        "tm_vllm_h100",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64…",
        "GEMM",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
        "float, float, float>, unsigned int, float, 4> >("
        "at::native::ReduceOp<float, at::native::MeanOps<float, "
        "float, float, float>, unsigned int, float, 4>)",
        "hta_a100_param_alexnet",
        "reduce_kernel<MeanOps>",
        "other",
    ),
    ("Memcpy DtoH (Device -> Pageable)", "hta_a100_event_sync", "Memcpy DtoH (Device -> Pageable)", "copy"),
    ("fused_experts_kernel", "ling3_tiny_h200", "fused_experts_kernel", "MoE"),
    ("kda_decode_kernel", "ling3_tiny_h200", "kda_decode_kernel", "attention"),
    ("lm_head_partial_kernel", "ling3_tiny_h200", "lm_head_partial_kernel", "GEMM"),
]


@pytest.mark.parametrize(
    ("name", "source", "short", "category"), REAL_NAMES, ids=[r[2][:40] for r in REAL_NAMES]
)
def test_short_name_and_category_of_real_kernel_names(
    name: str, source: str, short: str, category: str
) -> None:
    assert short_kernel_name(name) == short
    assert kernel_category(name) == category
    assert category in CATEGORIES


def _kernel_names(path: Path) -> set[str]:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return {e["name"] for e in events if isinstance(e, dict) and str(e.get("cat")).lower() == "kernel"}


@pytest.mark.slow
def test_the_names_above_are_in_real_traces(shared_dir: Path) -> None:
    """The expectations are about names that real traces hold, not names made up to fit the rules."""
    local = Path(__file__).resolve().parents[1] / "data" / "ling3_tiny_h200"
    held = set().union(
        *(_kernel_names(p) for p in local.glob("*.trace.json.gz")),
        *(_kernel_names(p) for p in (shared_dir / "data" / "real_traces").glob("*.json.gz")),
    )
    for name, source, _, _ in REAL_NAMES:
        if not name.startswith("Memcpy"):
            assert name in held, f"{name[:60]} (from {source}) is in no trace"


@pytest.mark.slow
def test_every_real_short_name_is_bounded_and_every_category_known(shared_dir: Path) -> None:
    names = set().union(
        *(_kernel_names(p) for p in sorted((shared_dir / "data" / "real_traces").glob("*.json.gz")))
    )
    assert len(names) > 300
    shorts = short_kernel_names(sorted(names))
    assert max(len(s) for s in shorts.values()) <= NAME_CHARS + 4  # a ` #N` suffix at most
    assert {kernel_category(n) for n in names} <= set(CATEGORIES)
    # Distinct names stay distinct in a table.
    assert len(set(shorts.values())) == len(names)


def test_colliding_short_names_are_numbered_in_order() -> None:
    float_fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, x>(int)"
    long_fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, x>(int)"
    assert short_kernel_names([float_fill, long_fill]) == {
        float_fill: "vectorized_elementwise_kernel<FillFunctor>",
        long_fill: "vectorized_elementwise_kernel<FillFunctor> #2",
    }
