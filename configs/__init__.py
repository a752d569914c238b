"""Configuration: shipped YAML files and the layered, validated settings loader."""
from configs.settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]
