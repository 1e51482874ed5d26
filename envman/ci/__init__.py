"""Validating the matrix in CI: the plan of rows, the run, and the support-matrix report."""
