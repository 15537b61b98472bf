"""Documents bubblescope writes and reads back: RunRecords (`run_record`), their checks (`validate`), the
sample budget of a read (`sample_budget`), and an analysis as DataFrames (`analysis_result`)."""
