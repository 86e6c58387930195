"""The version of agentgym, in a module of its own so that any module can name it without importing the package."""

from __future__ import annotations

__version__ = "0.1.0"
