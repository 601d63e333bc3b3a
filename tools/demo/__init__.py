"""Sinew's demo (``python3 build.py demo`` runs ``python -m tools.demo``): see ``__main__.py``."""
