"""`load_agent` for a host that keeps part of its agent in code: tools, who may answer and
per-source policies passed in, beside what the directory holds, never silently overriding it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import AssemblyError, load_agent, tool


@tool
async def check_stock(sku: str) -> str:
    """How many are left."""
    return f"{sku}: 3"


async def only_managers(request: dict[str, Any]) -> bool:
    return (request.get("principal") or {}).get("user") == "U0BOSS"


def a_directory(root: Path, agent_py: str = "name = 'ops'\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "instructions.md").write_text("You are the ops agent.")
    (root / "instructions.slack.md").write_text("Be brief.")
    (root / "agent.py").write_text(agent_py)
    tools = root / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "lookup.py").write_text(
        "from agent import tool\n\n"
        "@tool\nasync def lookup(order_id: str) -> str:\n"
        '    """Look up."""\n    return order_id\n'
    )
    return root


def test_tools_answerers_and_surfaces_from_code_join_the_directory(tmp_path: Path) -> None:
    agent = load_agent(
        a_directory(tmp_path / "a"),
        tools=[check_stock],
        authorize_answer=only_managers,
        surfaces={"slack": {"deny_tools": ["check_stock"]}},
    )
    assert sorted(t.name for t in agent.tools) == ["check_stock", "lookup"]
    assert agent.authorize_answer is only_managers
    assert agent.surfaces["slack"].deny_tools == ("check_stock",)


def test_a_tool_named_twice_is_an_assembly_error(tmp_path: Path) -> None:
    @tool(name="lookup")
    async def other_lookup(order_id: str) -> str:
        """Another lookup."""
        return order_id

    with pytest.raises(AssemblyError, match="lookup"):
        load_agent(a_directory(tmp_path / "a"), tools=[other_lookup])


def test_code_never_silently_overrides_the_directory(tmp_path: Path) -> None:
    root = a_directory(
        tmp_path / "a",
        "name = 'ops'\n"
        "async def authorize_answer(request):\n    return False\n"
        "surfaces = {'slack': {'deny_tools': ['lookup']}}\n",
    )
    with pytest.raises(AssemblyError, match="authorize_answer"):
        load_agent(root, authorize_answer=only_managers)
    with pytest.raises(AssemblyError, match="slack"):
        load_agent(root, surfaces={"slack": {"deny_tools": []}})
    # a source the directory does not mention is fine
    agent = load_agent(root, surfaces={"email": {"deny_tools": ["lookup"]}})
    assert set(agent.surfaces) == {"slack", "email"}


def test_an_effort_no_model_takes_is_an_assembly_error_naming_the_field(tmp_path: Path) -> None:
    root = a_directory(tmp_path / "a", "model = {'effort': 'extreme'}\n")

    with pytest.raises(AssemblyError) as info:
        load_agent(root)

    assert str(info.value) == (
        f"{root}: agent.py model: effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
    )


def test_the_agents_effort_is_read_from_its_directory(tmp_path: Path) -> None:
    root = a_directory(tmp_path / "a", "model = {'effort': 'low', 'thinking': False}\n")

    model = load_agent(root).model

    assert (model.effort, model.thinking) == ("low", False)
    assert "thinking" in model.model_fields_set
