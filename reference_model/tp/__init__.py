"""Tensor parallelism for the reference Ling decoder, applied from outside the model (gpt-fast style).

- `plan`: which tensors split along which dimension; `local_config`.
- `build.build_tp_model`: one rank's shard, built directly on its device (never the full model),
  from the seeded random stream or from a checkpoint (`checkpoint`: only this rank's blocks are read).
- `parallel.apply_tensor_parallel`: local head counts + the two all-reduces per layer as hooks.
- `lm_head`: vocabulary-parallel lm_head, on-device argmax across ranks, gathered full logits.
- `comm.TPComm`: rank, group, and the all-reduce the `fast_allreduce` switch selects.
- `distributed`: process-group setup from torchrun-style environment variables.
- `decode`, `graph`: the eager greedy loop at TP, and one step captured in a CUDA graph.
- `workload` (eager), `fast` (Triton kernels + CUDA graph), `spec` (speculative decoding): workloads.
"""
