"""TRACE: aggregation, attribution, proposal checks, gates, frontier and budget (pure)."""
