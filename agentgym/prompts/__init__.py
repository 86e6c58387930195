"""Versioned prompt templates per env, and the ``<action>`` parser.

``get_template(env_id, style)`` picks the template of an env family (the format its papers use):

==============  =====================  ===========================================
family          styles (first=default)  format source
==============  =====================  ===========================================
ALFWorld        verl-agent             verl-agent / GiGPO
WebShop         verl-agent             verl-agent / GiGPO
Sokoban         ragen, erl, erl-cells  RAGEN; ERL (no rules); ERL, one cell a token
FrozenLake      ragen, erl, erl-cells  RAGEN; ERL (no rules); ERL, one cell a token
HotpotQA        react                  ReAct
anything else   verl-agent             generic verl-agent structure
==============  =====================  ===========================================
"""

from __future__ import annotations

from agentgym.core import env_family
from agentgym.prompts.base import ParsedAction, PromptTemplate, extract_task, parse_action
from agentgym.prompts.grid import (
    FrozenLakeErlCellsTemplate,
    FrozenLakeErlTemplate,
    FrozenLakeTemplate,
    SokobanErlCellsTemplate,
    SokobanErlTemplate,
    SokobanTemplate,
)
from agentgym.prompts.hotpotqa import HotpotQATemplate
from agentgym.prompts.verl_agent import ALFWorldTemplate, GenericTemplate, WebShopTemplate

#: family -> {style: template class}; the first style is the default.
TEMPLATES: dict[str, dict[str, type[PromptTemplate]]] = {
    "ALFWorld": {"verl-agent": ALFWorldTemplate},
    "WebShop": {"verl-agent": WebShopTemplate},
    "Sokoban": {"ragen": SokobanTemplate, "erl": SokobanErlTemplate, "erl-cells": SokobanErlCellsTemplate},
    "FrozenLake": {"ragen": FrozenLakeTemplate, "erl": FrozenLakeErlTemplate, "erl-cells": FrozenLakeErlCellsTemplate},
    "HotpotQA": {"react": HotpotQATemplate},
    "*": {"verl-agent": GenericTemplate},
}


def get_template(env_id: str, style: str | None = None) -> PromptTemplate:
    """The prompt template for ``env_id``.

    Args:
        env_id: a registered id (``agentgym/ALFWorld-v0``); unknown families get the generic template.
        style: one of the family's styles (see the module table); None picks the default.

    Raises:
        ValueError: ``style`` is not known for the family (the message lists the known ones).
    """
    family = env_family(env_id)
    styles = TEMPLATES[family if family in TEMPLATES else "*"]  # "*": the generic template
    if style is None:
        return next(iter(styles.values()))()
    if style not in styles:
        raise ValueError(f"no prompt style {style!r} for {env_id}; choose one of {sorted(styles)}")
    return styles[style]()


__all__ = [
    "TEMPLATES",
    "ParsedAction",
    "PromptTemplate",
    "extract_task",
    "get_template",
    "parse_action",
]
