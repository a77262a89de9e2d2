"""The tests (pytest). A package so that ``tests.rigs`` (shared with the benchmarks) is found
from the repository root."""
