"""Rank entry points the TP tests spawn (importable by name, so spawned children can find them).

Each rank writes its result as JSON to `out_dir/rank<r>.json`: no queues, nothing pickled back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PROMPT = list(range(3, 19))


def tokens_worker(rank: int, world_size: int, port: int, out_dir: str, steps: int) -> None:
    """Join a gloo group, build this rank's debug shard, decode greedily, write tokens + prefill logits."""
    import torch

    torch.set_num_threads(1)
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from bubblescope.reference_model.config import get_preset
    from bubblescope.reference_model.tp.build import build_tp_model
    from bubblescope.reference_model.tp.decode import new_tp_cache, tp_generate
    from bubblescope.reference_model.tp.distributed import init_tp_from_env, shutdown

    comm = init_tp_from_env("cpu")
    try:
        model = build_tp_model(get_preset("debug"), comm, seed=0)
        tokens = tp_generate(model, PROMPT, steps)
        cache = new_tp_cache(model, len(PROMPT))
        with torch.no_grad():
            hidden = model.forward_hidden(torch.tensor([PROMPT]), cache).final
            # [V / TP] this rank's slice of the last position's logits
            local_logits = model.compute_logits(hidden)[0, -1]
        result = {
            "rank": rank,
            "tokens": tokens,
            "vocab_start": int(model.vocab_start),
            "local_logits": local_logits.tolist(),
            "kda_heads": model.config.num_attention_heads,
            "env": {
                key: os.environ.get(key) for key in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
            },
        }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        shutdown()
