"""Artifact storage: the S3 implementation of ``evoharness.ports.ArtifactStore`` and the local
SeaweedFS launcher used by tests and the local stack."""
