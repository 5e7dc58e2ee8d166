"""Live queries on Spark Structured Streaming (issue 12): a started query over unbounded
inputs, releasing each micro-batch's results to a sink exactly once."""
