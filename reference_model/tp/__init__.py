"""Tensor parallelism for the reference Ling decoder, applied from outside the model (gpt-fast style).

- `plan`: which tensors split along which dimension; `local_config`.
- `build.build_tp_model`: one rank's shard, built directly on its device (never the full model).
- `parallel.apply_tensor_parallel`: local head counts + the two all-reduces per layer as hooks.
- `lm_head.greedy_tokens`: vocabulary-parallel lm_head with an on-device argmax across ranks.
- `comm.TPComm`: rank, group, and the all-reduce the `fast_allreduce` switch selects.
- `distributed`: process-group setup from torchrun-style environment variables.
"""
