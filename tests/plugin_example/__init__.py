"""A scheduler plugin written only from public names (the tutorial's example)."""
