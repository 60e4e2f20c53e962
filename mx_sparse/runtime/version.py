"""The package version, read by setup.py (without importing mx_sparse) and by
``mx_sparse.__version__``; CHANGELOG.md has one section per version."""
__version__ = "0.2.0"
