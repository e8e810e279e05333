"""The generation service: runs the frozen generator chosen by deployment config
(sim | diffusers | kserve | triton | openai-images) behind ``evoharness.v1.GenerationService``,
content-addressing every execution in S3. Client adapter: ``services.generation.client``."""
