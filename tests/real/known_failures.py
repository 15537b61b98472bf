"""Real-trace claims today's analysis gets wrong: claim id -> what is wrong (strict xfails).

Written from a run of `tests/real` on 2026-12-01 against the analysis of this branch's base. When a
fix makes a claim pass, its strict xfail fails: delete the entry then.

Empty since the bounded-read analysis (issue 14 s1-5) was merged: all 46 entries then XPASSed and were
removed; the two gap claims that sat in excluded first steps (torchrec gap2, resnet_ckpt gap0) moved to a
steady step's gap, read from the raw events.
"""

KNOWN_FAILURES: dict[str, str] = {}
