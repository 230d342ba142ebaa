"""The sample data sets and test fixtures of tools/make_samples.py, one module per data set (``cli`` writes and checks them)."""
