"""The durable agent-turn engine: every step of a turn is checkpointed through `SessionStore`.

This module is the whole public API for a host (an application that defines agents, runs turns
and renders them): everything in `__all__`, and nothing from a module whose name starts with an
underscore. Store, model and sink authors find their side in `agent.seams`; the model adapters
also live in `agent.models`. `agent` imports neither `bot` nor `storage`.
"""

from __future__ import annotations

import typing

from agent._agent_def import Agent, Schedule, SuggestedPrompt
from agent._effects import Effect, EffectAuthority, resolve_receipt
from agent._errors import (
    AbnormalStopError,
    AgentError,
    AssemblyError,
    EffectConflictError,
    EffectError,
    EffectNotAppliedError,
    EffectUncertainError,
    FatalToolError,
    GrantNotFoundError,
    LeaseLostError,
    ModelError,
    RequestExpiredError,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeError,
    ResumeValidationError,
    SchemaMismatchError,
    SessionSuspendedError,
    StepConflictError,
    StopAuthorizationError,
    StoreError,
    StoreUnavailableError,
    ToolError,
    TurnError,
    TurnInterruptedError,
    TurnNotFoundError,
    UnknownToolError,
)
from agent._events import (
    ActionCompleted,
    ActionRequested,
    ApprovalEscalated,
    ApprovalReminded,
    ApprovalVoted,
    ApprovedByPolicy,
    ConfirmationRequested,
    ConfirmationResolved,
    InputRequested,
    InputResolved,
    MessageCompleted,
    MessageDelta,
    ProgressUpdated,
    TurnCancelled,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from agent._hitl_answerers import Answerer, PolicyAnswerer, Quorum, QuorumAnswerer, UserAnswerer
from agent._hitl_answering import grant_answer
from agent._hitl_capability_confirmation import NeedsConfirmation
from agent._hitl_checks import AnswerRequest, Grant, Principal, ResumeRequest
from agent._hitl_confirm import confirmation_digest, grant_confirmation
from agent._hitl_edits import Edit, EditRejected, apply_edits, changes_text
from agent._hitl_grants import GRANTS_POLICY, AllowAgain, revoke_grant, standing_grants
from agent._hitl_inbox import PendingApproval, RecentTurn, request_tally
from agent._hitl_policy_hook import ApproveAutomatically, PolicyApproval, ProposedWrite
from agent._hitl_quorum import Tally
from agent._hitl_reminders import Escalation
from agent._hitl_requests import ConfirmationRequest, InputRequest
from agent._loader import load_agent
from agent._messages import (
    AssistantMessage,
    JsonData,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    Usage,
    UserMessage,
)
from agent._policy import SurfacePolicy, SurfaceSettings
from agent._records import (
    CancelReason,
    ConfirmationRecord,
    ConfirmationStatus,
    ReceiptRecord,
    ReceiptStatus,
    TurnRecord,
    TurnStatus,
)
from agent._redaction import REDACTED, Redactor, password_in_url
from agent._runtime import DEFAULT_CONTEXT_MESSAGES, Runtime
from agent._session import AgentSession, ResetResult
from agent._sinks import EventHub, RecordingSink
from agent._stop_rights import STOP_POLICY
from agent._tool_context import ToolContext
from agent._tools import Tool, tool
from agent._turn_env import DEFAULT_TOOL_CONCURRENCY
from agent._turn_input import InboundEvent, Speaker, Trigger, TurnInput
from agent._turn_result import TurnResult
from agent.models import ScriptedModel, ScriptedReply
from agent.seams import EventSink, GrantRecord, GrantScope, Model, ModelSettings, SessionStore

if typing.TYPE_CHECKING:
    from agent.models._anthropic import AnthropicModel
    from agent.models._anthropic_settings import AnthropicSettings

__all__ = [
    "DEFAULT_CONTEXT_MESSAGES",
    "DEFAULT_TOOL_CONCURRENCY",
    "GRANTS_POLICY",
    "REDACTED",
    "STOP_POLICY",
    "AbnormalStopError",
    "ActionCompleted",
    "ActionRequested",
    "Agent",
    "AgentError",
    "AgentSession",
    "AllowAgain",
    "AnswerRequest",
    "Answerer",
    "AnthropicModel",
    "AnthropicSettings",
    "ApprovalEscalated",
    "ApprovalReminded",
    "ApprovalVoted",
    "ApproveAutomatically",
    "ApprovedByPolicy",
    "AssemblyError",
    "AssistantMessage",
    "CancelReason",
    "ConfirmationRecord",
    "ConfirmationRequest",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "ConfirmationStatus",
    "Edit",
    "EditRejected",
    "Effect",
    "EffectAuthority",
    "EffectConflictError",
    "EffectError",
    "EffectNotAppliedError",
    "EffectUncertainError",
    "Escalation",
    "EventHub",
    "EventSink",
    "FatalToolError",
    "Grant",
    "GrantNotFoundError",
    "GrantRecord",
    "GrantScope",
    "InboundEvent",
    "InputRequest",
    "InputRequested",
    "InputResolved",
    "JsonData",
    "LeaseLostError",
    "Message",
    "MessageCompleted",
    "MessageDelta",
    "Model",
    "ModelError",
    "ModelSettings",
    "NeedsConfirmation",
    "PendingApproval",
    "PolicyAnswerer",
    "PolicyApproval",
    "Principal",
    "ProgressUpdated",
    "ProposedWrite",
    "Quorum",
    "QuorumAnswerer",
    "ReceiptRecord",
    "ReceiptStatus",
    "RecentTurn",
    "RecordingSink",
    "Redactor",
    "RequestExpiredError",
    "ResetResult",
    "ResumeAuthorizationError",
    "ResumeConflictError",
    "ResumeError",
    "ResumeRequest",
    "ResumeValidationError",
    "Runtime",
    "Schedule",
    "SchemaMismatchError",
    "ScriptedModel",
    "ScriptedReply",
    "SessionStore",
    "SessionSuspendedError",
    "Speaker",
    "StepConflictError",
    "StopAuthorizationError",
    "StoreError",
    "StoreUnavailableError",
    "SuggestedPrompt",
    "SurfacePolicy",
    "SurfaceSettings",
    "Tally",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolMessage",
    "Trigger",
    "TriggerMessage",
    "TurnCancelled",
    "TurnCompleted",
    "TurnError",
    "TurnEvent",
    "TurnFailed",
    "TurnInput",
    "TurnInterruptedError",
    "TurnNotFoundError",
    "TurnRecord",
    "TurnResult",
    "TurnStarted",
    "TurnStatus",
    "UnknownToolError",
    "Usage",
    "UserAnswerer",
    "UserMessage",
    "apply_edits",
    "changes_text",
    "confirmation_digest",
    "grant_answer",
    "grant_confirmation",
    "load_agent",
    "password_in_url",
    "request_tally",
    "resolve_receipt",
    "revoke_grant",
    "standing_grants",
    "tool",
]


def __getattr__(name: str) -> object:
    """The Anthropic adapter is imported on first use: the SDK is heavy and tests rarely need it."""
    if name in ("AnthropicModel", "AnthropicSettings"):
        from agent.models import _anthropic

        return getattr(_anthropic, name)
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
