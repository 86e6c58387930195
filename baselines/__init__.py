"""One readable file per algorithm (see README.md); ``agentgym train NAME`` runs them (``baselines.cli``)."""
