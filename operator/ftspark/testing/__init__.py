"""Test doubles of the ports, in memory: thread-safe, with the real backends' semantics (conditional writes,
fences, conflicts), for fast tests of the reconciler, the elector and the stores' users. Not a backend: no
module of the product imports them (an import-linter contract says so)."""
