#!/usr/bin/env bash
# Profile the two sides of examples/profile/sampling_pr (sampled HF generate(), and the pull request that
# adds a logits-processor .item()) with --timed, as a user would in CI; tar each folder into OUT.
#   bash benchmarks/record_sampling_pr.sh OUT [NEW_TOKENS] [TIMED]
# CPU dry run: bash benchmarks/record_sampling_pr.sh /tmp/out 24 8
set -euo pipefail
out=$1 new_tokens=${2:-128} timed=${3:-64}
mkdir -p "$out"
for side in main pr; do
  python3 -m bubblescope profile --out "$out/$side" --timed "$timed" --warmup 3 --active 8 \
    --step-frame prepare_inputs_for_generation \
    -- python examples/profile/sampling_pr/$side/hf_sample.py --new-tokens "$new_tokens" 2>&1 | grep -v '^USDT' || true
  test -f "$out/$side/profile.json"
  tar -C "$out" -czf "$out/profile-$side.tgz" "$side" && rm -rf "${out:?}/$side"
done
ls -la "$out"
