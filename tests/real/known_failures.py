"""Real-trace claims today's analysis gets wrong: claim id -> what is wrong (strict xfails).

Written from a run of `tests/real` on 2026-12-01 against the analysis of this branch's base. When a
fix makes a claim pass, its strict xfail fails: delete the entry then.
"""

KNOWN_FAILURES: dict[str, str] = {
    "hta_a100_event_sync::bubble_bounded": (
        "issue 14 s1: unbounded sync rule: aten::is_nonzero blocked 35 us, blamed for 100 us"
    ),
    "hta_a100_event_sync::gap0_class": (
        "issue 14 s1: unbounded sync rule: the whole 100 us gap is sync, though the read began on an "
        "idle device (lost lead <= 27 us), the rest is host"
    ),
    "hta_a100_event_sync::bubble_max:0": (
        "issue 14 s1: unbounded sync rule: aten::is_nonzero bubble 100 us > lost lead 27 us"
    ),
    "hta_a100_sampled_2ranks::bubble_bounded": (
        "issue 14 s1: unbounded sync rule: reads blamed for 1.3-1.7 ms against 0.2-1.1 ms blocked"
    ),
    "hta_a100_sampled_2ranks::reads_found:0": (
        "issue 14 s1/s3: the 7 aten::item reads are merged under the TorchScript cpu_op `forward` "
        "(reported as 4 reads of op 'forward'), not found as aten::item"
    ),
    "hta_a100_sampled_2ranks::reads_found:1": (
        "issue 14 s3: 33 aten::to reads instead of 9: every cudaMemcpyAsync with a 'Pageable' GPU "
        "copy counts, including the 24 HtoD copies that return without waiting for the device"
    ),
    "hta_a100_sampled_2ranks::reads_exclusive": (
        "reads reported with op 'forward' (a TorchScript module, not the reading op)"
    ),
    "hta_a100_torchrec_cudagraph::bubble_bounded": (
        "issue 14 s1: unbounded sync rule: the 43 cudaStreamSynchronize-named aten::to reads blocked "
        "2.19 ms and are blamed for 3.66 ms"
    ),
    "hta_a100_torchrec_cudagraph::reads_found:0": (
        "op nesting: 74 aten::to reads instead of 75: the DtoH read under aten::to [+654688, +655696]"
        " is reported with op aten::resolve_neg (a 0-1 us op beside it)"
    ),
    "hta_a100_torchrec_cudagraph::reads_exclusive": (
        "a read reported with op aten::resolve_neg, which holds no runtime call"
    ),
    "hta_a100_torchrec_cudagraph::gap0_class": (
        "issue 14 s2: a 64.65 ms gap closed by a graph op queued 64.7 ms before it is called 'launch'"
        " (launch latency inside a CUDA graph)"
    ),
    "hta_a100_torchrec_cudagraph::gap1_class": (
        "issue 14 s2: a 64.33 ms gap closed by a graph op queued 66.2 ms before it is called 'launch'"
    ),
    "hta_a100_torchrec_cudagraph::gap2_class": (
        "issue 14 s2: a 64.24 ms gap closed by a graph replay launched before the trace is called "
        "'launch' (kernel-to-kernel launch latency), not outside"
    ),
    "hta_a100_param_alexnet::bubble_bounded": (
        "issue 14 s1: unbounded sync rule: the harness cudaDeviceSynchronize calls (5, blocked 938 "
        "us) are blamed for 10.9 s of CUDA/cuDNN start-up"
    ),
    "hta_a100_param_alexnet::gap0_class": (
        "issue 14 s1: unbounded sync rule: the 10.03 s start-up gap (cudaFree 6.0 s, first "
        "cudaLaunchKernel 3.06 s) is sync, blamed on an 11 us cudaDeviceSynchronize that began on an "
        "idle device"
    ),
    "hta_a100_param_alexnet::gap0_blame": (
        "issue 14 s4: blame '(no Python stack in trace)' (the read's site) instead of the cudaFree / "
        "cudaLaunchKernel that covered the gap"
    ),
    "hta_a100_param_alexnet::gap1_blame": (
        "issue 14 s4: blame 'aten::_convolution' instead of the two cudaMalloc (1.04 s) that covered the gap"
    ),
    "hta_a100_param_alexnet::gap2_class": (
        "issue 14 s1: unbounded sync rule: the 0.82 s gap (cudaStreamCreateWithFlags 733 ms) is sync,"
        " blamed on a read"
    ),
    "hta_a100_param_alexnet::gap2_blame": (
        "issue 14 s4: blame '(no Python stack in trace)' instead of cudaStreamCreateWithFlags"
    ),
    "hta_mi250_minitoy_rocm::reads_found:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::to) is not recognised as host-blocking, so the read "
        "is not found (0 reads)"
    ),
    "hta_mi250_minitoy_rocm::gap0_blame": (
        "issue 14 s4: blame 'host (no op or frame recorded in the gap)' though a 6.5 ms "
        "hipLaunchKernel in aten::add_ on the autograd thread covers the gap"
    ),
    "hta_mi250_minitoy_rocm::bubble_max:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::to) is not recognised as host-blocking, so the read "
        "is not found (0 reads)"
    ),
    "tl_hf_qwen05_h100::bubble_bounded": (
        "issue 14 s1: unbounded sync rule: aten::is_nonzero blocked 7.7 us, blamed for 686 us"
    ),
    "tl_hf_qwen05_h100::gap1_class": (
        "issue 14 s1: unbounded sync rule: the 242.8 us host gap is blamed on the earlier is_nonzero read"
    ),
    "tl_hf_qwen05_h100::bubble_max:0": (
        "issue 14 s1: unbounded sync rule: aten::is_nonzero bubble 686 us > lost lead 28.2 us"
    ),
    "tl_hf_qwen05_mi300x::reads_found:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::is_nonzero) is not recognised as host-blocking, so "
        "the read is not found (0 reads)"
    ),
    "tl_hf_qwen05_mi300x::reads_found:1": (
        "issue 14 s3: hipDeviceSynchronize is not recognised as host-blocking, so the read is not "
        "found (0 reads)"
    ),
    "tl_hf_qwen05_mi300x::gap0_class": (
        "issue 14 s3: the 624 us gap after hipDeviceSynchronize is host (the HIP sync is not a read);"
        " on the H100 the same gap is sync. Once HIP is read, the 7.5 us GPU-clock skew must be "
        "tolerated"
    ),
    "tl_hf_qwen05_mi300x::gap0_blame": (
        "blame 'entry_point.py(106): run_action; aten::embedding' instead of the synchronize "
        "(profile.py(34) run_torch_profiler)"
    ),
    "tl_hf_qwen05_mi300x::bubble_max:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::is_nonzero) is not recognised as host-blocking, so "
        "the read is not found (0 reads)"
    ),
    "tl_resnet18_train_mi300x::reads_found:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::item) is not recognised as host-blocking, so the "
        "read is not found (0 reads)"
    ),
    "tl_resnet18_train_mi300x::gap0_blame": (
        "issue 14 s4: blame 'host (no op or frame recorded in the gap)' though a 70 ms hipFree inside"
        " aten::miopen_convolution covers the 68.2 ms gap"
    ),
    "tl_resnet18_train_mi300x::gap1_blame": (
        "issue 14 s4: blame 'host (no op or frame recorded in the gap)' though a 70 ms hipFree inside"
        " aten::miopen_convolution covers the 68.0 ms gap"
    ),
    "tl_resnet18_train_mi300x::bubble_max:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::item) is not recognised as host-blocking, so the "
        "read is not found (0 reads)"
    ),
    "tl_resnet_ckpt_ddp_mi300x::gap0_class": (
        "issue 14 s2: a 2.16 ms gap whose closing op was launched before the trace (>= 1.6 ms "
        "earlier) is called 'launch' (kernel-to-kernel launch latency)"
    ),
    "tl_sglang_qwen3_decode_mi300x::reads_found:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::copy_) is not recognised as host-blocking, so the "
        "read is not found (0 reads)"
    ),
    "tl_sglang_qwen3_decode_mi300x::gap0_class": (
        "issue 14 s2: the 463 ms gap is host, though its closing kernel was launched 44 us in, after "
        "hipStreamWaitEvent: dependency"
    ),
    "tl_sglang_qwen3_decode_mi300x::gap1_class": (
        "issue 14 s3: the 150.7 us gap after the draining hipMemcpyWithStream read is host (the read "
        "is not found)"
    ),
    "tl_sglang_qwen3_decode_mi300x::gap1_blame": (
        "blame names the host's frames, not the read (cuda_graph_runner.py(276))"
    ),
    "tl_sglang_qwen3_decode_mi300x::bubble_max:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::copy_) is not recognised as host-blocking, so the "
        "read is not found (0 reads)"
    ),
    "tl_vllm_eager_b200::bubble_bounded": (
        "issue 14 s1/s3: two 8-byte HtoD (Pageable -> Device) cudaMemcpyAsync count as reads (22 us "
        "'blocked') and get 1.88 ms of sync idle"
    ),
    "tl_vllm_eager_b200::reads_exclusive": (
        "issue 14 s3: 2 aten::to reads reported: HtoD (Pageable -> Device) copies that return before "
        "their GPU copy starts"
    ),
    "tl_vllm_eager_b200::sync_idle_zero": ("1.88 ms of sync idle blamed on the HtoD pageable copies"),
    "tl_vllm_graph_decode_mi300x::reads_found:0": (
        "issue 14 s3: hipEventSynchronize is not recognised as host-blocking, so the read is not "
        "found (0 reads)"
    ),
    "tl_vllm_graph_decode_mi300x::bubble_max:0": (
        "issue 14 s3: hipEventSynchronize is not recognised as host-blocking, so the read is not "
        "found (0 reads)"
    ),
    "tm_vllm_h100::steps": (
        "issue 14 s5: --step-marker matches only ops and annotations, not the execute_model Python "
        "frames vLLM V1 marks its steps with: 1 whole-trace step instead of 11"
    ),
    "tm_vllm_mi300x::steps": (
        "issue 14 s5: --step-marker does not match Python frames: 1 whole-trace step instead of 11"
    ),
    "tm_vllm_mi300x::reads_found:0": (
        "issue 14 s3: hipMemcpyWithStream (aten::to) is not recognised as host-blocking, so the read "
        "is not found (0 reads); the H100 run of the same workload finds its 10 reads"
    ),
}
