"""Projects: the ``envman.toml`` file, trust, settings, the registry of projects, and project images."""
