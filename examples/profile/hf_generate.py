"""Greedy `generate()` (batch 1) of a small randomly initialised Llama-style model: a script written
without bubblescope in mind, to profile with

    bubblescope profile --out runs/hf --step-frame prepare_inputs_for_generation \
        -- python examples/profile/hf_generate.py --new-tokens 16

Each call of `prepare_inputs_for_generation` starts one step (one token of generate()'s loop), and each
blocking read is named at its exact line in transformers' source (`read_at`) and at the line of this
script that called generate() (`site`). No download: the model is built from a config. `--cache static
--compile` uses a static cache and lets generate() torch.compile the forward. Exits 0 with a notice
where transformers is not installed.
"""

from __future__ import annotations

import argparse
import sys


def build_model(device: str, dtype_name: str):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=None,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=getattr(torch, dtype_name))
    return model.to(device).eval()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--device", default=None, help="cuda when available, else cpu")
    parser.add_argument("--cache", choices=("dynamic", "static"), default="dynamic")
    parser.add_argument("--compile", action="store_true", help="let generate() compile the forward")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("transformers is not installed; nothing to run", file=sys.stderr)
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(device, args.dtype if device != "cpu" else "float32")
    prompt = torch.arange(2, 10, device=device).unsqueeze(0)  # [1, 8]
    options = {"max_new_tokens": args.new_tokens, "do_sample": False, "pad_token_id": 0}
    if args.cache == "static":
        options["cache_implementation"] = "static"
    if not args.compile:
        options["disable_compile"] = True
    with torch.inference_mode():
        tokens = model.generate(prompt, **options)  # GENERATE-CALL
    print(f"generated {tokens.shape[1] - prompt.shape[1]} tokens on {device}: {tokens[0, -4:].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
