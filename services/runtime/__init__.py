"""The ``Runtime`` gRPC service: serves evolved harnesses to production clients
(``Render(prompt, channel | registration_id)``), running exactly the ``HarnessRuntime`` that
evolution validated."""
