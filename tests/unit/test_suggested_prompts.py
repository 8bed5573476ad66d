"""Suggested prompts from an agent directory's `prompts.md`, and the agent's default time limit
for approvals from its `agent.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import Agent, AssemblyError, SuggestedPrompt, load_agent

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ops_agent"


def _directory(root: Path, prompts: str | None, agent_py: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "instructions.md").write_text("You are the ops agent.")
    (root / "agent.py").write_text(agent_py)
    if prompts is not None:
        (root / "prompts.md").write_text(prompts)
    return root


def test_prompts_md_becomes_the_agents_suggested_prompts(tmp_path: Path) -> None:
    prompts = (
        "# Suggested prompts\n"
        "\n"
        "- Open orders: Which orders are still open?\n"
        "- Refund: Refund order 42: it arrived broken, time 10:30\n"
    )
    agent = load_agent(_directory(tmp_path / "a", prompts))
    assert agent.suggested_prompts == (
        SuggestedPrompt(title="Open orders", message="Which orders are still open?"),
        SuggestedPrompt(title="Refund", message="Refund order 42: it arrived broken, time 10:30"),
    )


def test_without_prompts_md_there_are_none(tmp_path: Path) -> None:
    assert load_agent(_directory(tmp_path / "a", None)).suggested_prompts == ()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("Open orders: Which are open?", "no dash"),
        ("- Open orders", "no colon"),
        ("- : Which are open?", "no title"),
        ("- Open orders:   ", "no message"),
    ],
)
def test_a_malformed_line_is_an_assembly_error_naming_it(
    tmp_path: Path, line: str, why: str
) -> None:
    prompts = f"- Fine: A fine prompt\n\n{line}\n"
    with pytest.raises(AssemblyError, match=r"prompts.md, line 3: expected '- Title: message'"):
        load_agent(_directory(tmp_path / "a", prompts))


def test_more_than_four_is_an_assembly_error(tmp_path: Path) -> None:
    prompts = "".join(f"- P{i}: prompt {i}\n" for i in range(5))
    with pytest.raises(AssemblyError, match="line 5: at most 4"):
        load_agent(_directory(tmp_path / "a", prompts))
    many = [SuggestedPrompt(title=f"P{i}", message="m") for i in range(5)]
    with pytest.raises(AssemblyError, match="at most 4"):
        Agent(name="a", instructions="x", suggested_prompts=many)


def test_agent_py_sets_the_default_time_limit_for_approvals(tmp_path: Path) -> None:
    agent = load_agent(_directory(tmp_path / "a", None, "approval_expires_after = 3600\n"))
    assert agent.approval_expires_after == 3600
    with pytest.raises(AssemblyError, match="expires_after must be positive"):
        load_agent(_directory(tmp_path / "b", None, "approval_expires_after = -1\n"))


def test_the_example_agent_suggests_prompts() -> None:
    agent = load_agent(EXAMPLE)
    assert 1 <= len(agent.suggested_prompts) <= 4
    assert all(p.title and p.message for p in agent.suggested_prompts)
