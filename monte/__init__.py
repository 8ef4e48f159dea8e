"""monte: an honest, append-only, git-native record of post-training work."""

__version__ = "0.1.0"
