"""Conformance suite and certification harness for PyTorch backends."""

__version__ = "0.1.0"
