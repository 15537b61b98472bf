"""Names of the ranges bubblescope itself writes into a trace, in one place (no imports: the capture side
writes them, the analysis core reads them).
"""

# Each call of a tapped read (`capture/user_reads.py`): `bubblescope.read#<id>`, tying the trace's blocking
# call to the Python stack the tap recorded.
READ_MARKER_PREFIX = "bubblescope.read#"
# bubblescope's own synchronizes (profile session start/stop, the profiled window's drain): never the user's.
OWN_SYNC_MARKER = "bubblescope.own_sync"
WINDOW_DRAIN = "bubblescope.window_drain"
OWN_SYNC_ANNOTATIONS = frozenset({OWN_SYNC_MARKER, WINDOW_DRAIN})
