"""Helpers for the tests: paths of the test robots, bounded waits, node processes, rigs and
wrappers around production code (the independent references are in test/oracles)."""
