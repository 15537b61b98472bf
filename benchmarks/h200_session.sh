#!/usr/bin/env bash
# The GPU batches behind benchmarks/RESULTS.md, as run on the lent H200 (one call each, < 10 min).
#   bash benchmarks/h200_session.sh OUT STAGE...
# Stages: round4 (issue 27's second session, call 2: its switches ablated on top of the fastest round-3
# step, their GPU tests, DSpark vs that step), r4-* (that session's call-1 probes: r4-spec, the verify's
# union experts launch, tests + tile/grid sweep; r4-experts, the decode experts launch's weight stream;
# r4-kdapersist, the KDA block as one persistent launch; r4-kdanorm, KDA's head norm in o_proj's prologue),
# round3 (issue 27: the round's GPU tests, its switches ablated on top of the others, routing
# sites, DSpark vs decode in one process), round2 (issue 17's second round: GPU tests, its switches ablated on top of the others, decode
# step and DSpark verify), mla-glue (fused_mla_glue's tests, microbenchmark and e256 step), issue17 (fast_topk / early_shared kernels, tests, e256 step),
# verify-union (the verify
# window's MoE switches, DSpark 9.95), tests (GPU test suite of the fast/spec/capture paths), suite (the whole test suite on this GPU),
# spec-tests, trace (the real trace kept under tests/data/h200_recorded/), predicted (issue 23: the switches
# with prediction rules ablated on e256 and tiny), ablate-tiny, ablate-e256,
# eager-e256, spec-e256, spec-e256-rest (the rows spec-e256 left out), gate-toy and gate-tiny (gate
# trust), and on two GPUs: tp-tests, tp-tiny (bench_tp tokens + tpot_tiny), tp-bisect (which switch
# setting hangs the debug preset's TP fast path), tp-ablate, tp-spec and tp-spec-ablate (the speculative
# step's switches) at TP=$TP (default 2; TP=4 on the nvidia-h200-x4 machine is issue 8). Big folders
# come back as one tarball each (the device tool returns at most 8 files). Stages that use one GPU can
# run side by side under different CUDA_VISIBLE_DEVICES.
set -u
out=$1; shift
mkdir -p "$out"
source tools/device_setup.sh
for stage in "$@"; do
  echo "=== $stage $(date -u +%H:%M:%S)"
  case $stage in
    tests)
      timeout 260 python3 -m pytest -q -m gpu -p no:cacheprovider tests/fast tests/spec tests/capture \
        tests/test_workload.py 2>&1 | tail -40 | tee "$out/gpu_tests.log" ;;
    trace)
      timeout 90 python3 benchmarks/record_h200_trace.py "$out/trace" --steps 5 2>&1 | tail -5
      tar -czf "$out/trace.tar.gz" -C "$out" trace && rm -rf "$out/trace" ;;
    issue17)
      # issue 17: the fast_topk / early_shared kernels against the old path (same run), their GPU
      # equivalence tests, then ling3-flash-e256 all on vs all on but each new switch (one build).
      timeout ${ROUTING_S:-95} python3 benchmarks/bench_routing.py --out "$out" ${ROUTING_ONLY:+--only "$ROUTING_ONLY"} \
        2>&1 | grep -v '^{' | tail -24
      timeout ${KTEST_S:-70} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe.py \
        -k "fast_topk or new_switches or early_shared" 2>&1 | tail -4 | tee "$out/kernel_tests.log"
      timeout ${FTEST_S:-90} python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/fast/test_gpu.py \
        -k "fast_topk or early_shared or new_moe" 2>&1 | grep -v "^bf16\|^\s*$" | tail -16 | tee "$out/fast_gpu_tests.log"
      timeout ${DECODE_S:-150} python3 benchmarks/bench_decode.py "$out/decode" --presets ling3-flash-e256 \
        --keys all_on,all_on-fast_topk,all_on-early_shared,all_on-new --no-eager --budget-s $(( ${DECODE_S:-150} - 12 )) \
        2>&1 | grep -v "^\s*$" | tail -10 ;;
    round3)
      # Issue 27, round 3, one call: GPU tests of the round's switches (kernels at e256 shapes, switch
      # equivalence on ling3-tiny), the round's switches ablated on top of every other one on
      # ling3-flash-e256 (records, traces, report: the kernel table with achieved TB/s), the MoE layer's
      # routing sites at e256 shapes, and DSpark at 9.95 against the decode step in one process.
      timeout ${TESTS_S:-150} python3 -m pytest -q -s -m gpu -p no:cacheprovider ${R3_TESTS:-tests/kernels/test_moe_routing_site.py \
        tests/kernels/test_norm_epilogue_gpu.py tests/fast/test_norm_epilogue_gpu.py tests/fast/test_gpu.py} \
        -k "routing_site or routing_in_experts or norm_epilogue" 2>&1 \
        | grep -E "ulp off|relative RMS|launches per step|routing_in_experts|passed|failed|Error" | tail -40 \
        | tee "$out/gpu_tests.log"
      toggles=$(python3 -c "from bubblescope.reference_model.on_top import ROUND3; print(','.join(ROUND3))")
      timeout ${ABLATE_S:-190} bubblescope ablate --workload bubblescope.reference_model.on_top:make_round3_workload \
        --preset ling3-flash-e256 --toggles "$toggles" --steps ${ABLATE_STEPS:-64} --repeats 3 --out /tmp/abl-r3 \
        --format table 2>&1 | grep -v Warn | tail -40 | tee "$out/ablate_round3.log"
      tar -czf "$out/ablate_round3.tar.gz" --exclude='*.html' -C /tmp abl-r3
      timeout ${SPEC_S:-100} python3 benchmarks/bench_spec_vs_decode.py "$out/spec_vs_decode" --preset ling3-flash-e256 \
        --accept 9.95 --block 9 --rounds 6 --decode-steps 48 --spec-steps 16 --warmup 4 --budget-s 30 2>&1 | tail -25
      timeout ${ROUTE_S:-40} python3 benchmarks/bench_routing.py --out "$out/route_sites" --only "route sites e256" \
        --pdl-only 2>&1 | grep -v '^{' | tail -16 ;;
    r4-spec)
      # Issue 27 round 4, the DSpark verify (h27-spec), call 1: GPU tests of the union experts launch
      # (compact grid, bf16 hi/lo down products vs the naive reference), the window router tiles,
      # verify_gated_norm and verify_fused_in_proj (kernel at e256 shapes; each switch on vs off on the debug
      # preset in bf16), then four verify micro-benchmarks at e256 shapes: the KDA gated norm (eager vs one
      # launch), the KDA input projections (six GEMMs vs one, cuBLAS vs Triton GEMV), the window's router
      # GEMV tiles, and the union experts launch's tile / grid sweep with the step's routing (29 distinct
      # experts of a 10-row window). Everything under $out/spec/.
      mkdir -p "$out/spec"
      timeout ${SPEC_TESTS_S:-34} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_union_compact.py \
        tests/kernels/test_kda_gated_norm.py tests/spec/test_verify_gated_norm.py tests/spec/test_verify_fused_in_proj.py \
        tests/kernels/test_moe_window_router.py 2>&1 | tail -8 | tee "$out/spec/gpu_tests.log"
      timeout ${SPEC_NORM_S:-7} python3 benchmarks/bench_verify_gated_norm.py --out "$out/spec" ${SPEC_SWEEP_ARGS:-} 2>&1 \
        | tail -2 | tee "$out/spec/verify_gated_norm.log"
      timeout ${SPEC_PROJ_S:-10} python3 benchmarks/bench_verify_in_proj.py --out "$out/spec" ${SPEC_SWEEP_ARGS:-} 2>&1 \
        | tail -5 | tee "$out/spec/verify_in_proj.log"
      timeout ${SPEC_ROUTER_S:-10} python3 benchmarks/bench_verify_router.py --out "$out/spec" ${SPEC_SWEEP_ARGS:-} 2>&1 \
        | tail -8 | tee "$out/spec/verify_router.log"
      timeout ${SPEC_SWEEP_S:-38} python3 benchmarks/bench_verify_union.py --out "$out/spec" ${SPEC_SWEEP_ARGS:-} 2>&1 \
        | grep -v '^{' | tail -16 | tee "$out/spec/verify_union.log" ;;
    r4-spec-ablate)
      # Issue 27 round 4, call 2 (optional): the two verify switches (on_top.SPEC_ROUND4: verify_gated_norm,
      # verify_fused_in_proj) ablated through the product on DSpark at oracle 9.95, every other speculative
      # switch held on (records, traces, attribution with intervals; tarball without the HTML).
      toggles=$(python3 -c "from bubblescope.reference_model.on_top import SPEC_ROUND4; print(','.join(SPEC_ROUND4))")
      timeout ${SPEC_ABLATE_S:-150} bubblescope ablate --workload bubblescope.reference_model.on_top:make_spec_round4_workload \
        --preset ling3-flash-e256 --toggles "$toggles" --steps 12 --warmup 3 --repeats 3 --out /tmp/abl-spec-r4 \
        --format table 2>&1 | grep -v Warn | tail -30 | tee "$out/ablate_spec_round4.log"
      tar -czf "$out/ablate_spec_round4.tar.gz" --exclude='*.html' -C /tmp abl-spec-r4 ;;
    round4-final)
      # Issue 27 round 4's final call (2026-12-03 16:33 UTC): the tma_experts kernel tests (-x: the first
      # failure's traceback is kept), its ling3-tiny switch equivalence, the KDA head-norm kernels, then the
      # round4 stage (tma_experts and kda_norm_in_oproj ablated, DSpark vs decode), the verify switches'
      # ablation and the 2560-row GEMV chain. ~300 s.
      p="python3 -m pytest -q -p no:cacheprovider"
      timeout 45 $p -x tests/kernels/test_moe_tma.py > "$out/tma_tests.log" 2>&1; tail -25 "$out/tma_tests.log"
      timeout 70 $p -s -m gpu tests/fast/test_gpu.py -k tma_experts > "$out/fast_gpu_tests.log" 2>&1
      grep -E "relative RMS|passed|failed|Error" "$out/fast_gpu_tests.log" | tail -8
      timeout 25 $p tests/kernels/test_kda_head_norm_gpu.py > "$out/head_norm_tests.log" 2>&1
      tail -3 "$out/head_norm_tests.log"
      R4_TOGGLES=tma_experts,kda_norm_in_oproj ABLATE_S=120 SPEC_S=100 R4_SPEC_CMD="python3 \
        benchmarks/bench_spec_vs_decode.py --preset ling3-flash-e256 --accept 9.95 --block 9 --rounds 6 \
        --decode-steps 48 --spec-steps 16 --warmup 4 --budget-s 30" bash "$0" "$out" round4
      SPEC_ABLATE_S=120 bash "$0" "$out" r4-spec-ablate
      GEMV_ONLY=chain GEMV_TESTS_S=1 GEMV_S=35 bash "$0" "$out" r4-gemv ;;
    round4)
      # Issue 27, round 4 (call 2 of its second session): the GPU tests of the round's switches (R4_TESTS,
      # gpu-marked files), the round's switches ablated on top of the fastest round-3 step
      # (make_round4_workload: every earlier switch on but norm_epilogue), then DSpark against that same
      # fastest non-speculative step in one process.
      if [ -n "${R4_TESTS:-}" ]; then
        timeout ${TESTS_S:-120} python3 -m pytest -q -s -m gpu -p no:cacheprovider $R4_TESTS 2>&1 \
          | grep -E "ulp|relative|max err|launches|passed|failed|Error|error" | tail -40 | tee "$out/gpu_tests.log"
      fi
      # R4_TOGGLES: a subset of ROUND4 (the others held off), e.g. only the switches still in the running.
      toggles=${R4_TOGGLES:-$(python3 -c "from bubblescope.reference_model.on_top import ROUND4; print(','.join(ROUND4))")}
      if [ -n "$toggles" ]; then
        timeout ${ABLATE_S:-260} bubblescope ablate --workload bubblescope.reference_model.on_top:make_round4_workload \
          --preset ling3-flash-e256 --toggles "$toggles" --steps ${ABLATE_STEPS:-64} --repeats 3 --out /tmp/abl-r4 \
          --max-exact-shapley ${R4_EXACT:-4} --format table 2>&1 | grep -v Warn | tail -40 | tee "$out/ablate_round4.log"
        tar -czf "$out/ablate_round4.tar.gz" --exclude='*.html' -C /tmp abl-r4
      fi
      if [ -n "${R4_SPEC_CMD:-}" ]; then
        timeout ${SPEC_S:-100} $R4_SPEC_CMD "$out/spec_vs_decode" 2>&1 | tail -25
      fi ;;
    r4-gemv)
      # Issue 27, round 4, call 1: the 2560-row decode GEMVs (KDA o_proj / MLA dense 2560x4096, dense down
      # 2560x6144). GPU tests of the L2 prefetch before gdc_wait (real and odd shapes, eager/PDL/graph),
      # then bench_gemv_2560.py: every tile / prefetch variant alone and in the KDA block's PDL chain,
      # same call, against the copy ceiling it measures (gemv_2560.json, table last). <= 100 s. GEMV_DRY=1:
      # tiny shapes, checked, not timed (the CPU rehearsal under TRITON_INTERPRET=1).
      mkdir -p "$out/gemv"
      timeout ${GEMV_TESTS_S:-35} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemv_prefetch_gpu.py \
        tests/kernels/test_gemv.py -k prefetch 2>&1 | tail -6 | tee "$out/gemv/gpu_tests.log"
      timeout ${GEMV_S:-65} python3 benchmarks/bench_gemv_2560.py --out "$out/gemv" ${GEMV_ONLY:+--only "$GEMV_ONLY"} ${GEMV_DRY:+--dry-run} \
        > "$out/gemv/bench.log" 2>&1
      grep -v '^{' "$out/gemv/bench.log" | tail -40 ;;
    r4-kdanorm)
      # Issue 27, round 4, call 1 (h27-kdanorm): kda_norm_in_oproj. First bench_kda_norm.py (KDA alone,
      # o_proj alone, the in_proj -> KDA -> o_proj block over 32 layers under PDL, head norm in KDA vs in
      # o_proj's prologue, 4 and 8 splits, the early vs late ticket, same call; kda_norm.json rewritten after every case), then the
      # GPU tests: e256 kernels (fast compiles), then the switch on ling3-tiny. <= 100 s. KDANORM_DRY=1:
      # tiny shapes on the CPU, checked, not timed.
      mkdir -p "$out/kdanorm"
      timeout ${KDANORM_S:-58} python3 benchmarks/bench_kda_norm.py --out "$out/kdanorm" --splits ${KDANORM_SPLITS:-4,8} \
        ${KDANORM_DRY:+--dry-run} > "$out/kdanorm/bench.log" 2>&1
      grep -v '^{' "$out/kdanorm/bench.log" | tail -30
      timeout ${KDANORM_KTEST_S:-17} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_kda_head_norm_gpu.py \
        2>&1 | tail -8 | tee "$out/kdanorm/kernel_gpu_tests.log"
      timeout ${KDANORM_FTEST_S:-25} python3 -m pytest -q -s -p no:cacheprovider tests/fast/test_kda_norm_in_oproj_gpu.py \
        2>&1 | grep -E "relative|launches|passed|failed|skipped|Error|error" | tail -12 | tee "$out/kdanorm/fast_gpu_tests.log" ;;
    r4-kdapersist)
      # Issue 27, round 4, call 1: the KDA block (in_proj GEMV -> KDA decode -> o_proj GEMV) as ONE persistent
      # launch with grid barriers (kernels/kda_block). GPU tests: one launch vs today's three launches, 3 layers
      # in a PDL graph replayed 3 times (bit-identical with the GEMV tiles), vs the PyTorch reference; then
      # bench_kda_block.py: 32 layers in one CUDA graph + PDL, today's three launches (and with o_proj under
      # gemv_prefetch), GEMVs only, 5 one-launch variants, the same kernel as three launches, in_proj alone
      # (GEMV vs phase 1 on the persistent grid), 5 interleaved rounds, the copy ceiling in the same process
      # (kda_block.json, table last). <= 100 s. KDAPERSIST_DRY=1: tiny shapes, checks only, no GPU
      # tests (the CPU rehearsal under TRITON_INTERPRET=1).
      mkdir -p "$out/kdapersist"
      if [ -z "${KDAPERSIST_DRY:-}" ]; then
        timeout ${KDAPERSIST_TESTS_S:-45} python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_kda_block_gpu.py \
          > "$out/kdapersist/gpu_tests.log" 2>&1
        grep -E "step 4 layer 2|passed|failed|Error" "$out/kdapersist/gpu_tests.log" | tail -12
      fi
      timeout ${KDAPERSIST_S:-55} python3 benchmarks/bench_kda_block.py --out "$out/kdapersist" ${KDAPERSIST_DRY:+--dry-run} \
        > "$out/kdapersist/bench.log" 2>&1
      grep -v '^{' "$out/kdapersist/bench.log" | tail -16 ;;
    r4-experts)
      # Issue 27, round 4, call 1: the decode MoE experts launch's weight stream (h27-experts). GPU tests of
      # the TMA experts launch (e256 eager and graph + PDL, vs moe_naive; the tiny partial-tile cases are
      # interpreter-only since call 1, RESULTS.md round 4), then bench_routing's "experts stream e256" cases: today's deep_experts vs the TMA
      # candidates in one MoE layer (fast_topk, early_shared, routing_in_experts), 16 tokens in one CUDA
      # graph under PDL, against the copy ceiling of the same call; then the candidates' registers /
      # shared memory with the device's Triton. <= 100 s. EXPERTS_DRY=1: tiny shapes, checked, not timed
      # (the CPU rehearsal under TRITON_INTERPRET=1; the GPU-only tests skip there).
      mkdir -p "$out/experts"
      tag=e256; [ -n "${EXPERTS_DRY:-}" ] && tag=tiny
      timeout ${EXPERTS_TESTS_S:-37} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_tma.py 2>&1 \
        | tail -6 | tee "$out/experts/gpu_tests.log"
      timeout ${EXPERTS_BENCH_S:-48} python3 benchmarks/bench_routing.py --out "$out/experts" \
        --only "experts stream $tag" --pdl-only ${EXPERTS_DRY:+--dry-run} \
        > "$out/experts/bench.log" 2>&1
      grep -v '^{' "$out/experts/bench.log" | tail -12
      [ -n "${EXPERTS_DRY:-}" ] || timeout ${EXPERTS_COMPILE_S:-15} python3 benchmarks/compile_experts.py --route-here \
        2>&1 | grep -v -i warn | tail -11 | tee "$out/experts/compile.log" ;;
    round2)
      # Issue 17, second round, one call: GPU tests of the round's kernels and switches, then the round's
      # switches ablated on top of every other one: the decode step (ling3-flash-e256), and the verify-side
      # switches on DSpark at oracle 9.95 (records, traces and reports as tarballs).
      mla_tests=$(ls tests/kernels/test_mla_glue.py 2>/dev/null)
      timeout ${TESTS_S:-100} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_deep.py \
        tests/kernels/test_moe_union.py tests/kernels/test_kda_decode.py tests/kernels/test_kda_decode_gpu.py \
        tests/spec/test_verify_norm_kernel.py $mla_tests 2>&1 | tail -6 | tee "$out/kernel_tests.log"
      timeout ${FTEST_S:-60} python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/fast/test_gpu.py \
        -k "new_moe or mla_glue" 2>&1 | grep -E "relative RMS|passed|failed|Error" | tail -12 | tee "$out/fast_gpu_tests.log"
      toggles=$(python3 -c "from bubblescope.reference_model.on_top import ROUND2; print(','.join(ROUND2))")
      timeout ${ABLATE_S:-200} bubblescope ablate --workload bubblescope.reference_model.on_top:make_round2_workload \
        --preset ling3-flash-e256 --toggles "$toggles" --steps 64 --repeats 3 --out /tmp/abl-r2 \
        --format table 2>&1 | grep -v Warn | tail -30
      tar -czf "$out/ablate_round2.tar.gz" -C /tmp abl-r2
      timeout ${SPEC_ABLATE_S:-230} bubblescope ablate \
        --workload bubblescope.reference_model.on_top:make_spec_round2_workload --preset ling3-flash-e256 \
        --toggles expert_union,deep_experts,verify_norm_kernel --steps 12 --warmup 3 --repeats 3 \
        --out /tmp/abl-spec-r2 --format table 2>&1 | grep -v Warn | tail -30
      tar -czf "$out/ablate_spec_round2.tar.gz" -C /tmp abl-spec-r2 ;;
    mla-glue)
      # issue 17 round 2: fused_mla_glue (the MLA head products in two launches): kernel tests vs the
      # PyTorch ops, its GPU switch tests, the glue microbenchmark at e256 shapes (old ops vs the new
      # pair, with/without PDL, a tile sweep), then ling3-flash-e256 all on vs all on but it (one build).
      timeout ${KTEST_S:-60} python3 -m pytest -q -p no:cacheprovider tests/kernels/test_mla_glue.py 2>&1 \
        | tail -4 | tee "$out/mla_glue_kernel_tests.log"
      timeout ${FTEST_S:-120} python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/fast/test_gpu.py \
        -k fused_mla_glue 2>&1 | grep -v "^\s*$" | tail -12 | tee "$out/mla_glue_gpu_tests.log"
      timeout ${BENCH_S:-150} python3 benchmarks/bench_mla_glue.py --out "$out" 2>&1 | grep -v '^{"side' \
        | tail -24 | tee "$out/mla_glue_bench.log"
      timeout ${DECODE_S:-150} python3 benchmarks/bench_decode.py "$out/decode" --presets ling3-flash-e256 \
        --keys all_on,all_on-fused_mla_glue --no-eager --budget-s $(( ${DECODE_S:-150} - 12 )) \
        2>&1 | grep -v "^\s*$" | tail -10 ;;
    issue17-run)
      # The product's own measurement: all on (the issue-17 switches included) vs all on but them.
      old=no_readback,pdl,fused_moe,bf16_gate,bf16_lm_head,graph_metadata
      timeout ${RUN_S:-70} bubblescope run --preset ling3-flash-e256 --all --steps 64 --repeats 3 --out /tmp/run-all \
        2>&1 | tail -14
      timeout ${RUN_S:-70} bubblescope run --preset ling3-flash-e256 --toggles $old --steps 64 --repeats 3 \
        --out /tmp/run-old 2>&1 | tail -14
      tar -czf "$out/runs_e256.tar.gz" -C /tmp run-all run-old ;;
    issue17-ablate)
      # The issue-17 switches ablated ON TOP of the earlier ones (reference_model/on_top.py: baseline =
      # the old all-on step, all-on = the new one), records, traces and analyses as one tarball.
      timeout ${ABLATE_S:-200} bubblescope ablate --workload bubblescope.reference_model.on_top:make_workload \
        --preset ling3-flash-e256 --toggles fast_topk,early_shared --steps 64 --repeats 3 --out /tmp/abl17 \
        --format table 2>&1 | grep -v Warn | tail -30
      tar -czf "$out/ablate17.tar.gz" -C /tmp abl17 ;;
    predicted)
      # Issue 23 §3: the switches that have a prediction rule (bubblescope/ablate/predict.py), alone and
      # removed from all-on, on ling3-flash-e256 then ling3-tiny, inside one budget (PREDICT_BUDGET_S; a
      # preset cut short still comes back, resumable); the reports' predicted-vs-measured table is the
      # check. Records, traces, analyses and the console log come back (no HTML pages).
      toggles=no_readback,pdl,fused_moe,fused_mla_glue,bf16_gate,bf16_lm_head,graph_metadata
      deadline=$(( $(date +%s) + ${PREDICT_BUDGET_S:-490} ))
      for preset in ${PREDICT_PRESETS:-ling3-flash-e256 ling3-tiny}; do
        left=$(( deadline - $(date +%s) - 8 ))
        [ "$left" -gt 30 ] || { echo "no time left for $preset"; break; }
        timeout $left bubblescope ablate --preset $preset --toggles ${PREDICT_TOGGLES:-$toggles} \
          --max-exact-shapley 0 --shapley-permutations 1 --steps ${PREDICT_STEPS:-32} --repeats 3 \
          --out /tmp/pred-$preset --format table 2>&1 | grep -v Warn | tee "$out/pred_$preset.log" | tail -24
        tar -czf "$out/pred_$preset.tar.gz" --exclude='*.html' -C /tmp pred-$preset
      done ;;
    ablate-tiny)
      timeout 200 bubblescope ablate --preset ling3-tiny --all --shapley-permutations 1 --max-exact-shapley 0 \
        --steps 48 --repeats 3 --out /tmp/ablate-tiny --format table 2>&1 | tail -30
      tar -czf "$out/ablate_tiny.tar.gz" -C /tmp ablate-tiny ;;
    spec-tests)
      timeout 70 python3 -m pytest -q -m gpu -p no:cacheprovider tests/spec/test_spec_gpu.py 2>&1 | tail -15 \
        | tee "$out/spec_tests.log" ;;
    ablate-e256)
      timeout 290 bubblescope ablate --preset ling3-flash-e256 --all --shapley-permutations 1 --max-exact-shapley 0 \
        --steps 32 --repeats 3 --out /tmp/ablate-e256 --format table 2>&1 | tail -30
      tar -czf "$out/ablate_e256.tar.gz" -C /tmp ablate-e256 ;;
    eager-e256)
      timeout 150 python3 benchmarks/bench_eager.py --preset ling3-flash-e256 --steps 16 --warmup 2 --repeats 2 \
        --out "$out" 2>&1 | tail -6 ;;
    spec-e256)
      timeout 170 python3 benchmarks/bench_spec.py "$out/spec" --spec dspark nextn --accept 9.95 4 --block 9 \
        --skip-baseline --skip-extras --extremes-only --budget-s 100 2>&1 | tail -30 ;;
    suite)
      timeout 290 python3 -m pytest -q -p no:cacheprovider --durations=15 tests > "$out/suite.log" 2>&1
      tail -25 "$out/suite.log" ;;
    spec-e256-rest)
      timeout 140 python3 benchmarks/bench_spec.py "$out/spec1" --spec dspark nextn --accept 1 --block 8 \
        --skip-baseline --skip-extras --extremes-only --budget-s 90 2>&1 | tail -12
      timeout 280 python3 benchmarks/bench_spec.py "$out/specmix" --spec dspark nextn --accept 9.95 --block 9 \
        --budget-s 200 2>&1 | tail -30 ;;
    gate-toy)
      timeout 150 python3 benchmarks/bench_gate_trust.py --pairs 24 --budget-s 130 --out "$out/gate_toy.json" \
        2>&1 | grep -v USDT | tail -14 ;;
    gate-tiny)
      timeout 200 python3 benchmarks/bench_gate_trust.py --workload bubblescope.reference_model.workload:make_workload \
        --preset ling3-tiny --pairs 20 --steps 32 --repeats 3 --budget-s 150 --out "$out/gate_tiny.json" \
        2>&1 | grep -v USDT | tail -14 ;;
    tp-tests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/tp 2>&1 | tail -15 | tee "$out/tp_tests.log" ;;
    tp-tiny)
      timeout 260 python3 benchmarks/bench_tp.py --world-size 2 --parts tokens,tpot_tiny --out "$out/tp" 2>&1 | tail -8
      tar -czf "$out/tp_tiny.tar.gz" -C "$out" tp && rm -rf "$out/tp" ;;
    tp-bisect)
      timeout ${BISECT_S:-400} python3 benchmarks/tp_switch_bisect.py "$out/bisect" --world-size 2 --preset debug \
        --deadline-s ${BISECT_DEADLINE_S:-60} ${BISECT_ONLY:+--only $BISECT_ONLY} > "$out/bisect.log" 2>&1
      grep -v Warn "$out/bisect.log" | grep -v "^\s*$" | tail -60 ;;
    tp-ablate)
      # issue 7 / 8: the full ling3-flash ablation at TP=$TP (default 2): all off, each alone, all on, all on
      # minus each, the cumulative order; records, per-rank traces and report come back as one tarball.
      tp=${TP:-2}
      timeout ${ABLATE_S:-560} bubblescope ablate --tp "$tp" --preset ling3-flash --all --max-exact-shapley 0 \
        --shapley-permutations 1 --steps 32 --repeats 3 --out "/tmp/abl-tp$tp" --format table 2>&1 | tail -30
      tar -czf "$out/ablate_tp$tp.tar.gz" -C /tmp "abl-tp$tp" ;;
    tp-spec)
      # issues 7 / 8: DSpark and NEXTN at oracle accept lengths 4 and 9.95 at TP=$TP (MoE kernels, step in
      # CUDA graphs): every switch on ("all"), every switch on but fast_allreduce ("nccl"), and every switch
      # off ("off": the published 3.33 ms is NEXTN before the switches), one RunRecord each. A call that
      # must stay under 10 min takes a subset: SPEC_DRAFTS, SPEC_ACCEPTS, SPEC_SETTINGS.
      tp=${TP:-2}
      spec_start=$SECONDS
      but_fast=staged_kda,fused_kda_verify,no_readback,pdl,bf16_gate,bf16_lm_head
      for draft in ${SPEC_DRAFTS:-dspark nextn}; do
        for accept in ${SPEC_ACCEPTS:-9.95 4}; do
          block=8; [ "$accept" = 9.95 ] && block=9
          for setting in ${SPEC_SETTINGS:-all nccl off}; do
            case $setting in
              all) switches="--all" ;;
              nccl) switches="--toggles $but_fast" ;;
              *) switches="" ;;
            esac
            # A run that cannot finish inside the stage's budget (SPEC_STAGE_S) is not started.
            if [ $((SECONDS - spec_start + ${SPEC_RUN_S:-200})) -gt ${SPEC_STAGE_S:-100000} ]; then
              echo "skipped $draft $accept $setting: stage budget"; continue
            fi
            echo "--- $draft accept $accept $setting $(date -u +%H:%M:%S)"
            timeout ${SPEC_RUN_S:-200} bubblescope run --tp "$tp" --preset ling3-flash --spec "$draft" \
              --block "$block" --accept-len "$accept" $switches --steps 12 --warmup 3 --repeats 2 \
              --out "/tmp/spec-tp$tp/$draft-$accept-$setting" --format table 2>&1 | tail -6
            # A rank outliving a timed-out launcher would hold its 125 GB shard and starve the next run.
            nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -9 2>/dev/null
          done
        done
      done
      tar -czf "$out/spec_tp$tp.tar.gz" -C /tmp "spec-tp$tp" ;;
    tp-spec-ablate)
      # issue 7: every switch alone, all on, all on minus each and the cumulative order for speculative
      # decoding at TP=$TP (DSpark, oracle 9.95, block 9) in one ablation: the shards are built once.
      # Records and the report come back in one tarball, the ranks' traces in 15 MB parts.
      tp=${TP:-2}
      timeout ${ABLATE_S:-500} bubblescope ablate --tp "$tp" --preset ling3-flash --spec dspark --block 9 \
        --accept-len 9.95 --all --max-exact-shapley 0 --shapley-permutations 1 --steps 12 --warmup 3 \
        --repeats 2 --out "/tmp/spec-abl-tp$tp" --format table 2>&1 | tail -30
      (cd /tmp && find "spec-abl-tp$tp" -name '*.json' ! -name '*.analysis.json' -o -name report.html \
        | tar -czf "$out/spec_ablate_tp$tp.tar.gz" -T -)
      (cd /tmp && find "spec-abl-tp$tp" -name '*.gz' | tar -cf - -T - | split -b 15M - "$out/spec_ablate_traces_tp$tp.tar.") ;;
    verify-union)
      # Issue 17: the verify window's MoE on fast_topk / early_shared / expert_union (tests, the window
      # layer micro-benchmark, then DSpark at oracle 9.95 with same-run rows and a kernel breakdown).
      timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_union.py \
        tests/spec/test_spec_fast_moe.py 2>&1 | tail -15 | tee "$out/verify_union_tests.log"
      timeout 45 python3 benchmarks/bench_routing.py --out "$out" --only "moe window" 2>&1 | tail -4
      timeout ${SPEC_S:-200} python3 benchmarks/bench_spec.py /tmp/spec --spec dspark --accept 9.95 --block 9 \
        --skip-extras --extremes-only --skip-kernels --profile-steps 6 --budget-s ${SPEC_BUDGET_S:-110} \
        2>&1 | grep -v "^- {" | tail -30
      tar -czf "$out/spec.tar.gz" -C /tmp spec ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo "=== done $(date -u +%H:%M:%S)"
