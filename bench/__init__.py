"""Benchmarks of vitpos's position encodings (``python -m bench``); not part of the test run."""
