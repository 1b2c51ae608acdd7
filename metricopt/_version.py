"""The package version (one place; read by metricopt and its model files)."""

__version__ = "0.1.0"
