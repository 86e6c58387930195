"""agentgym's envs in other trainers' contracts, one module per consumer (each its own extra).

``tools`` (no extra): every env family as named tools and OpenAI ``tools`` schemas. ``trl``: TRL's
``GRPOTrainer(environment_factory=...)``. ``openenv``: an OpenEnv server. ``gem``: GEM registration.
``skyrl``: SkyRL-gym ``BaseTextEnv`` registration. These modules use the envs only (and never ``rl/`` or
``baselines/``); the env classes stay plain Gymnasium.
"""
