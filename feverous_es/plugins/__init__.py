"""The plugin registry of the claim pipeline's stages."""
