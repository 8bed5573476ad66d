"""An agent: instructions, tools and model settings, checked when it is assembled so a
misdeclared tool fails at start-up rather than in the middle of someone's turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent._errors import AssemblyError, ToolError
from agent._hitl_answer_notes import check_expiry
from agent._hitl_answerers import Answerer, AnswererInput
from agent._hitl_checks import AuthorizeAnswer, answerers_of
from agent._hitl_policy_hook import ApproveAutomatically
from agent._mcp_declarations import McpAttachment, McpServer
from agent._policy import SurfacePolicy, SurfaceSettings, TurnPolicy, build_policy, check_surfaces
from agent._tools import Tool
from agent.seams import ModelSettings


@dataclass(frozen=True, kw_only=True, init=False)
class Schedule:
    """A proactive turn on a clock: `cron` is a five-field expression in UTC."""

    name: str
    cron: str
    seed: str
    channel: str
    session: str | None = None
    answerers: Answerer | None = None
    """Who may answer what the scheduled turn asks: nobody spoke, so without this a park or a
    confirmation in the turn is refused."""

    def __init__(
        self,
        *,
        name: str,
        cron: str,
        seed: str,
        channel: str,
        session: str | None = None,
        answerers: AnswererInput | None = None,
    ) -> None:
        """Written out (not generated) so `answerers` may be given as the dict hosts have
        always passed (`{"user": id}`, `{"policy": p, "scope": s}`) and still be held typed;
        a malformed one is an `AssemblyError`, as it was when the agent was assembled."""
        try:
            chosen = answerers_of(answerers)
        except ToolError as err:
            raise AssemblyError(f"schedule {name!r}: {err}") from None
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cron", cron)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "channel", channel)
        object.__setattr__(self, "session", session)
        object.__setattr__(self, "answerers", chosen)


MAX_SUGGESTED_PROMPTS = 4
"""Slack shows at most four (`assistant.threads.setSuggestedPrompts`: "up to four")."""


@dataclass(frozen=True, kw_only=True)
class SuggestedPrompt:
    """A prompt a surface offers before anyone has typed (Slack's suggested prompts): the
    `title` shown, and the `message` sent as the person's when they pick it."""

    title: str
    message: str


@dataclass(frozen=True, kw_only=True)
class Agent:
    name: str
    instructions: str
    tools: Sequence[Tool] = ()
    model: ModelSettings = field(default_factory=ModelSettings)
    overlays: Mapping[str, str] = field(default_factory=dict)
    """Per-source instructions (`instructions.<source>.md`), keyed by source."""
    surfaces: Mapping[str, SurfacePolicy | SurfaceSettings] = field(default_factory=dict)
    authorize_answer: AuthorizeAnswer | None = None
    approve_automatically: ApproveAutomatically | None = None
    """Shown each `confirmation="required"` call before a person is asked; a `PolicyApproval`
    runs it at once as approved by that policy (`agent._hitl_automatic`), None asks a person."""
    schedules: Sequence[Schedule] = ()
    approval_expires_after: float | None = None
    """Seconds a request put to a person (a park, a proposed write) waits for an answer before
    it expires, where the tool or the call names no limit; None: forever."""
    suggested_prompts: Sequence[SuggestedPrompt] = ()
    """At most `MAX_SUGGESTED_PROMPTS` (`prompts.md` in an agent directory)."""
    mcp_servers: Sequence[McpServer] = ()
    """MCP servers whose tools `agent.mcp.attach_mcp` adds (`mcp.json`, `mcp_servers=`)."""
    mcp: McpAttachment | None = field(default=None, compare=False, repr=False)
    """The servers' connections once attached (closed with the runtime's host)."""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for t in self.tools:
            if not isinstance(t, Tool):
                raise AssemblyError(f"agent {self.name!r}: {t!r} is not a @tool")
            if t.name in seen:
                raise AssemblyError(f"agent {self.name!r}: two tools are named {t.name!r}")
            seen.add(t.name)
            if t.effect == "write" and t.confirmation == "none":
                raise AssemblyError(
                    f"agent {self.name!r}: tool {t.name!r} is declared effect='write' with no "
                    "confirmation; declare confirmation='required' or 'capability'"
                )
            if t.confirmation == "capability" and t.local:
                # It could neither ask (no park inside a transaction) nor write through
                # run_effect, the one gate that checks the answer: its write would go unconfirmed.
                raise AssemblyError(
                    f"agent {self.name!r}: tool {t.name!r} is declared confirmation='capability' "
                    "but is a local (def) tool; a capability asks with ctx.needs_confirmation and "
                    "writes through ctx.run_effect, which only an async tool can: declare it "
                    "`async def`, or use confirmation='required'"
                )
        try:
            check_expiry(self.approval_expires_after, what=f"agent {self.name!r}")
        except ValueError as err:
            raise AssemblyError(str(err)) from None
        if len(self.suggested_prompts) > MAX_SUGGESTED_PROMPTS:
            raise AssemblyError(
                f"agent {self.name!r}: {len(self.suggested_prompts)} suggested prompts; Slack "
                f"shows at most {MAX_SUGGESTED_PROMPTS}"
            )
        surfaces = {k: SurfacePolicy.of(v) for k, v in self.surfaces.items()}
        # A surface may deny an MCP server's tools before they are listed (or while it is down).
        mcp_named = [
            name
            for s in surfaces.values()
            for name in s.deny_tools
            if any(name.startswith(f"{m.name}__") for m in self.mcp_servers)
        ]
        check_surfaces(
            self.name, surfaces, self.overlays, [*(t.name for t in self.tools), *mcp_named]
        )
        object.__setattr__(self, "mcp_servers", tuple(self.mcp_servers))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "surfaces", surfaces)
        object.__setattr__(self, "schedules", tuple(self.schedules))
        object.__setattr__(self, "suggested_prompts", tuple(self.suggested_prompts))

    def expiry_for(self, tool: Tool | None) -> float | None:
        """How long what `tool` asks waits for an answer: its own limit, else the agent's;
        None: forever (`math.inf` on the tool overrides the agent's default)."""
        chosen = tool.expires_after if tool is not None else None
        return check_expiry(
            chosen if chosen is not None else self.approval_expires_after, what=self.name
        )

    def tool_named(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def policy_for(self, source: str | None) -> TurnPolicy:
        surfaces: Mapping[str, SurfacePolicy] = self.surfaces  # type: ignore[assignment]
        return build_policy(
            source=source,
            instructions=self.instructions,
            overlays=self.overlays,
            surfaces=surfaces,
            tool_names=[t.name for t in self.tools],
        )

    @property
    def fingerprint(self) -> str:
        """Identifies the behaviour a checkpoint was made under: prompt, tool specs, settings."""
        body: dict[str, object] = {
            "instructions": self.instructions,
            "overlays": dict(sorted(self.overlays.items())),
            "tools": [t.spec.model_dump() for t in self.tools],
            "model": self.model.model_dump(),
        }
        remote = [[t.name, t.effect] for t in self.tools if getattr(t, "remote_name", None)]
        if remote:
            # An MCP tool's classification is the server's (readOnlyHint): a change of it under
            # a parked turn is a change of behaviour even when the specs read the same.
            body["mcp"] = remote
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        return digest[:16]
