"""The compatibility matrix: data in ``matrices/``, typed objects in ``model``."""
