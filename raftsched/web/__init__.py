"""The web console every node serves on its HTTP listener (see :mod:`raftsched.web.console`)."""

from raftsched.web.console import Console

__all__ = ["Console"]
