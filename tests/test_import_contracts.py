"""DESIGN.md section 1's import rules, as the import-linter contracts in pyproject.toml, hold on the code.

The same check is ``lint-imports`` in the repository root (needs ``pip install -e ".[dev]"``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

importlinter = pytest.importorskip("importlinter", reason='import-linter is in the dev extra: pip install -e ".[dev]"')

from importlinter import configuration  # noqa: E402
from importlinter.application import rendering, use_cases  # noqa: E402
from importlinter.application.app_config import settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class _AddImports:
    """A graph builder that adds imports to the real graph (to show that the contracts catch them)."""

    def __init__(self, inner, extra):
        self.inner, self.extra = inner, extra

    def build(self, **kw):
        graph = self.inner.build(**kw)
        for importer, imported in self.extra:
            graph.add_import(importer=importer, imported=imported)
        return graph


def _report(extra_imports=()):
    configuration.configure()
    use_cases._register_built_in_contract_types()  # what `lint-imports` does before reading the contracts
    options = use_cases.read_user_options(str(ROOT / "pyproject.toml"))
    inner = settings.GRAPH_BUILDER
    if extra_imports:
        settings.configure(GRAPH_BUILDER=_AddImports(inner, extra_imports))
    try:
        return use_cases.create_report(options, cache_dir=None)
    finally:
        settings.configure(GRAPH_BUILDER=inner)


def _broken(report) -> set[str]:
    return {contract.name for contract, check in report.get_contracts_and_checks() if not check.kept}


def test_import_contracts_are_kept(capsys):
    report = _report()
    if report.broken_count:
        rendering.render_report(report)
    assert report.kept_count == 7 and report.broken_count == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    ("importer", "imported", "contract"),
    [
        ("agentgym.envs.echo", "agentgym.rl.trainer", "Envs know nothing"),
        ("agentgym.agents.llm", "agentgym.rl.rollout", "Agents act without"),
        ("agentgym.models.generation", "agentgym.prompts", "Models sit below"),
        ("agentgym.integrations.tools", "agentgym.rl.rollout", "Integrations wrap the envs"),
        ("baselines.seed", "baselines.erl", "Baselines build on GRPO only"),
        ("baselines.grpo", "baselines.rloo", "Baselines build on GRPO only"),
        ("baselines.grpo", "baselines.cli", "Baselines build on GRPO only"),
        ("agentgym.core", "agentgym.loop", "Layers"),
        ("agentgym.rl.trainer", "baselines.grpo", "Layers"),
        ("baselines.grpo", "agentgym.cli", "Layers"),
        ("agentgym.envs.echo", "agentgym.episodes", "Layers"),
        ("agentgym.version", "agentgym.core", "Layers"),
        ("agentgym.rl.losses", "agentgym.rl.trainer", "No import cycles"),
    ],
)
def test_a_back_arrow_breaks_its_contract(importer, imported, contract):
    broken = _broken(_report([(importer, imported)]))
    assert any(name.startswith(contract) for name in broken), broken
