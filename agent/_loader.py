"""Assemble an agent from a directory, so prompt, per-source overlays, settings and tools live as
files an operator can read and review:

    my_agent/
      instructions.md            base system prompt
      instructions.<source>.md   overlay for turns from that source (e.g. instructions.slack.md)
      prompts.md                 suggested prompts, one `- Title: message` per line (optional)
      agent.py                   name, surfaces, authorize_answer, approve_automatically,
                                 schedules, model, approval_expires_after (all optional)
      tools/*.py                 modules whose module-level `@tool` objects become the tools
      mcp.json                   MCP servers whose tools join them (`agent.mcp`; optional,
                                 or `mcp_servers = [...]` in agent.py)
      *.py                       helpers the others import relatively (`from ..payments import x`)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from agent._agent_def import MAX_SUGGESTED_PROMPTS, Agent, SuggestedPrompt
from agent._errors import AssemblyError
from agent._hitl_checks import AuthorizeAnswer
from agent._hitl_policy_hook import ApproveAutomatically
from agent._mcp_declarations import McpServer, read_mcp_json, servers_of
from agent._policy import SurfacePolicy, SurfaceSettings
from agent._tools import Tool
from agent.seams import ModelSettings

log = logging.getLogger(__name__)


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AssemblyError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise AssemblyError(f"{path}: {type(exc).__name__}: {exc}") from exc
    return module


def _register_package(name: str, folder: Path) -> None:
    """Make `name` a package over `folder`, so an agent's modules can share helpers by relative
    import without the directory being on `sys.path`. Stale submodules from an earlier load of
    the same directory are dropped, so a reload sees the files as they are now."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    sys.modules[name] = importlib.util.module_from_spec(spec)


def _tools_in(folder: Path, package: str) -> list[Tool]:
    found: list[Tool] = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = _load_module(path, f"{package}.tools.{path.stem}")
        found.extend(v for v in vars(module).values() if isinstance(v, Tool))
    return found


def read_prompts(path: Path) -> tuple[SuggestedPrompt, ...]:
    """`prompts.md`: one prompt per line as `- Title: message` (the title ends at the first
    colon); blank lines and `#` headings or comments are skipped. Anything else, an empty title
    or message, or more than `MAX_SUGGESTED_PROMPTS`, is an `AssemblyError` naming the line."""
    if not path.is_file():
        return ()
    prompts: list[SuggestedPrompt] = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        title, colon, message = line.removeprefix("- ").partition(":")
        if not line.startswith("- ") or not colon or not title.strip() or not message.strip():
            raise AssemblyError(
                f"{path}, line {number}: expected '- Title: message', got {raw.strip()!r}"
            )
        if len(prompts) == MAX_SUGGESTED_PROMPTS:
            raise AssemblyError(
                f"{path}, line {number}: at most {MAX_SUGGESTED_PROMPTS} suggested prompts "
                "(Slack shows no more)"
            )
        prompts.append(SuggestedPrompt(title=title.strip(), message=message.strip()))
    return tuple(prompts)


def load_agent(
    path: str | Path,
    *,
    emitted_sources: Iterable[str] | None = None,
    tools: Sequence[Tool] = (),
    authorize_answer: AuthorizeAnswer | None = None,
    approve_automatically: ApproveAutomatically | None = None,
    surfaces: Mapping[str, SurfacePolicy | SurfaceSettings] | None = None,
) -> Agent:
    """Build the agent a directory describes; raises `AssemblyError` on anything that would fail
    later (a write tool without confirmation, a surface mode without its overlay file).

    `emitted_sources`, when given, are the sources the mounted channels produce: a policy for any
    other source is logged as a warning, since it can never apply.

    A host that keeps part of its agent in code passes it here: `tools` join the directory's,
    `authorize_answer`, `approve_automatically` and `surfaces` fill what the directory leaves
    out. Where both name the same thing it is an `AssemblyError`, not a silent override: which
    one a person edits must be the one that applies.
    """
    root = Path(path)
    base = root / "instructions.md"
    if not base.is_file():
        raise AssemblyError(f"{root}: instructions.md is missing")
    overlays = {
        p.name[len("instructions.") : -len(".md")]: p.read_text()
        for p in sorted(root.glob("instructions.*.md"))
    }
    package = f"_agent_{abs(hash(root.resolve()))}"
    _register_package(package, root)
    _register_package(f"{package}.tools", root / "tools")
    settings: dict[str, Any] = {}
    if (root / "agent.py").is_file():
        module = _load_module(root / "agent.py", f"{package}.agent")
        settings = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    model = settings.get("model", ModelSettings())
    if isinstance(model, dict):
        model = _model_settings(root, model)
    found_surfaces = dict(settings.get("surfaces", {}))
    clash = sorted(set(found_surfaces) & set(surfaces or {}))
    if clash:
        raise AssemblyError(f"{root}: agent.py and the code both set surfaces[{clash[0]!r}]")
    all_surfaces = {**found_surfaces, **(surfaces or {})}
    if emitted_sources is not None:
        for source in set(all_surfaces) - set(emitted_sources):
            log.warning("agent policy for source %r: no mounted channel emits it", source)
    found_authorize = settings.get("authorize_answer")
    if found_authorize is not None and authorize_answer is not None:
        raise AssemblyError(f"{root}: agent.py and the code both set authorize_answer")
    found_automatic = settings.get("approve_automatically")
    if found_automatic is not None and approve_automatically is not None:
        raise AssemblyError(f"{root}: agent.py and the code both set approve_automatically")
    return Agent(
        name=str(settings.get("name", root.name)),
        instructions=base.read_text(),
        tools=[*_tools_in(root / "tools", package), *tools],
        model=model,
        overlays=overlays,
        surfaces=all_surfaces,
        authorize_answer=found_authorize or authorize_answer,
        approve_automatically=found_automatic or approve_automatically,
        schedules=settings.get("schedules", ()),
        approval_expires_after=settings.get("approval_expires_after"),
        suggested_prompts=read_prompts(root / "prompts.md"),
        mcp_servers=_mcp_servers(root, settings.get("mcp_servers", ())),
    )


def _mcp_servers(root: Path, in_code: Iterable[Any]) -> tuple[McpServer, ...]:
    """`mcp.json` and agent.py's `mcp_servers`, together; a name in both is an `AssemblyError`.
    Only declarations here: their tools are listed by `agent.mcp.attach_mcp`, which is async."""
    from_file = read_mcp_json(root / "mcp.json")
    return servers_of([*from_file, *in_code], where=str(root))


def _model_settings(root: Path, values: dict[str, Any]) -> ModelSettings:
    """`model = {...}` in agent.py, or an `AssemblyError` naming each wrong field and its rule
    (an effort the API has no level for), never a validation traceback at start."""
    try:
        return ModelSettings(**values)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}"
            for problem in err.errors()
        )
        raise AssemblyError(f"{root}: agent.py model: {problems}") from None
