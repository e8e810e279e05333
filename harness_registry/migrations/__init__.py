"""Alembic migrations of the registry schema (run them with ``harness_registry.db``)."""
