"""Benchmark datasets: importers, the import flow, export and test perturbation."""
