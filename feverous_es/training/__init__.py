"""Training, export and the model card of the pipeline's learned parts (torch only here)."""
