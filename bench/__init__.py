"""The benchmarks: each module is a script run from the checkout it measures, ``python -m
bench.<name>`` (see bench/README.md); what they share is in :mod:`bench.common`."""
