"""Subcommands of the ``vitpos`` command line (argument parsing only; the work lives elsewhere)."""
