"""Output files: atomic writes (`atomic`) and one writer per output folder (`out_lock`)."""
