"""Profiling the user's own loop (`bubblescope.profile(...)`, `bubblescope profile -- python x.py`).

- `session.py`    the profiled window over the loop: steps, warm-up, recording, the read tap
- `script.py`     runs a script or module in-process under a session (the `profile` command)
- `outputs.py`    what a finished session writes: trace, analysis, report.html, profile.json
- `page.py`       report.html: the trace report plus where each blocking read is called from
- `read_sites.py` merges the read tap's stacks into a profile's analysis (each read's exact line)
- `run_sites.py`  the same exact lines for `run` / `ablate` analyses, their `site` left as it was
- `read_guard.py` `no_new_reads`: fail code under test that makes a blocking read (the pytest plugin)

Named `profiling`, not `profile`: `bubblescope.profile` is the public function, and importing a
subpackage of the same name would replace that attribute with the module.
"""
