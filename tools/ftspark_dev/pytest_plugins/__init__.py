"""pytest plugins of the whole suite (pyproject.toml's addopts)."""
