"""The gRPC contract's generated Python stubs (``services.protos.evoharness.v1``)."""
