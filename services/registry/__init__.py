"""The ``HarnessRegistry`` gRPC service (``server.py``) and its client adapter
(``client.py``) over ``harness_registry``."""
