"""Shared pieces of every gRPC service: server bootstrap, interceptors, health, metrics,
settings and process management."""
