"""Small helpers with no polybag dependency above the model: threads, progress, safe text and YAML, closing."""
