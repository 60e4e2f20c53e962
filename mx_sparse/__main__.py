"""``python -m mx_sparse``: prints what this installation is and supports (``show_config``)."""
from . import show_config

show_config()
