"""The plugin registry of the claim pipeline's stages (built with the pipeline issue)."""
