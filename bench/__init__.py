"""Benchmarks (``make bench``): what safety costs, as ratios against a floor measured in
the same run. Never part of the tests; nothing gates on a time."""
