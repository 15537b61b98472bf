"""Real-trace claims today's analysis gets wrong: claim id -> what is wrong (strict xfails).

Written from a run of `tests/real` on 2026-12-01 against the analysis of this branch's base. When a
fix makes a claim pass, its strict xfail fails: delete the entry then.
"""

KNOWN_FAILURES: dict[str, str] = {
    "hta_a100_torchrec_cudagraph::gap2_class": (
        "issue 14 s2: a 64.24 ms gap closed by a graph replay launched before the trace is called "
        "'launch' (kernel-to-kernel launch latency), not outside"
    ),
    "tl_resnet_ckpt_ddp_mi300x::gap0_class": (
        "issue 14 s2: a 2.16 ms gap whose closing op was launched before the trace (>= 1.6 ms "
        "earlier) is called 'launch' (kernel-to-kernel launch latency)"
    ),
}
