"""Speculative decoding of the reference model (issue 6): drafts, verify/accept on device, commit.

Entry points: `workload.make_spec_workload` (the bubblescope Workload), `decoder.SpecDecoder` (the
loop), `target_verify` (verify forward and commit), drafts in `nextn`, `dspark`/`dspark_draft`,
`self_draft`; `acceptance` (oracle and greedy), `routing` (expert-union probe), `graphs`.
"""
