"""Benchmarks reachable as ``regionflow bench ...``; each returns a JSON-able dict of figures."""
