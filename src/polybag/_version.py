"""The version of polybag (read by ``pyproject.toml`` and by writers that name their library)."""

__version__ = "0.1.0"
