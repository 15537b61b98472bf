"""Sampled `generate()` (batch 1) of a small randomly initialised Llama-style model: the pull request's
side of ../main/hf_sample.py. It adds a logits processor that logs each step's top logit with `.item()`,
one more host-blocking read per token.

    bubblescope profile --out runs/pr --timed 64 --step-frame prepare_inputs_for_generation \
        -- python examples/profile/sampling_pr/pr/hf_sample.py --new-tokens 96

No download: the model is built from a config (4 layers, eager attention). Exits 0 with a notice where
transformers is not installed.
"""

from __future__ import annotations

import argparse
import sys


def build_model(device: str):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=None,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()


class TopLogitLog:
    """A logits processor that keeps each step's top logit (for a debugging print)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def __call__(self, input_ids, scores):
        self.values.append(scores.max().item())  # READ-added
        return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("transformers is not installed; nothing to run", file=sys.stderr)
        return 0
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(device)
    prompt = torch.arange(2, 10, device=device).unsqueeze(0)  # [1, 8]
    options = {"max_new_tokens": args.new_tokens, "do_sample": True, "top_k": 50, "top_p": 0.9}
    from transformers import LogitsProcessorList

    log = TopLogitLog()
    options["logits_processor"] = LogitsProcessorList([log])
    with torch.inference_mode():
        tokens = model.generate(prompt, **options, temperature=0.8, pad_token_id=0, disable_compile=True)
    print(f"sampled {tokens.shape[1] - prompt.shape[1]} tokens on {device}; top logit {max(log.values):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
