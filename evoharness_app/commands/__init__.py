"""CLI verbs, one module per area; each exposes ``register(app: typer.Typer)``."""
