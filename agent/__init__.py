"""The durable agent-turn engine: every step of a turn is checkpointed through `SessionStore`.

It imports neither `bot` nor `storage`; hosts plug stores, sinks and models into its seams.
"""

from agent.agent_def import Agent, Schedule
from agent.channels import Channel, ChannelContext, TurnStreamer, receive
from agent.consent import NeedsConfirmation
from agent.effects import Effect, EffectAuthority, resolve_receipt
from agent.errors import (
    AbnormalStopError,
    AgentError,
    AssemblyError,
    EffectConflictError,
    EffectError,
    EffectNotAppliedError,
    EffectUncertainError,
    FatalToolError,
    LeaseLostError,
    ModelError,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeError,
    ResumeValidationError,
    SchemaMismatchError,
    SessionSuspendedError,
    StepConflictError,
    StoreError,
    ToolError,
    TurnError,
    TurnInterruptedError,
    TurnNotFoundError,
    UnknownToolError,
)
from agent.events import (
    ActionCompleted,
    ActionRequested,
    ConfirmationRequested,
    ConfirmationResolved,
    InputRequested,
    MessageCompleted,
    MessageDelta,
    TurnCancelled,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from agent.hitl import Grant, ResumeRequest
from agent.loader import load_agent
from agent.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    Usage,
    UserMessage,
)
from agent.policy import SurfacePolicy
from agent.redaction import Redactor
from agent.runtime import Dispatcher, Runtime
from agent.scripted_model import ScriptedModel, ScriptedReply
from agent.seams import (
    ConfirmationRecord,
    ConfirmationStatus,
    EventSink,
    FactRecord,
    Lease,
    Model,
    ModelEvent,
    ModelReply,
    ModelRequest,
    ModelSettings,
    ReceiptRecord,
    ReceiptStatus,
    SessionStatus,
    SessionStore,
    StepCommit,
    StoreHandle,
    StreamRestart,
    TextDelta,
    ToolSpec,
    TurnRecord,
    TurnStatus,
)
from agent.session import AgentSession, ResetResult, grant_answer, grant_confirmation
from agent.sinks import EventHub, RecordingSink
from agent.tool_context import ToolContext
from agent.tools import Tool, tool
from agent.turn_input import InboundEvent, Speaker, Trigger, TurnInput
from agent.turn_result import TurnResult

__all__ = [
    "AbnormalStopError",
    "ActionCompleted",
    "ActionRequested",
    "Agent",
    "AgentError",
    "AgentSession",
    "AnthropicModel",
    "AnthropicSettings",
    "AssemblyError",
    "AssistantMessage",
    "Channel",
    "ChannelContext",
    "ConfirmationRecord",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "ConfirmationStatus",
    "Dispatcher",
    "Effect",
    "EffectAuthority",
    "EffectConflictError",
    "EffectError",
    "EffectNotAppliedError",
    "EffectUncertainError",
    "EventHub",
    "EventSink",
    "FactRecord",
    "FatalToolError",
    "Grant",
    "InboundEvent",
    "InputRequested",
    "Lease",
    "LeaseLostError",
    "Message",
    "MessageCompleted",
    "MessageDelta",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelReply",
    "ModelRequest",
    "ModelSettings",
    "NeedsConfirmation",
    "ReceiptRecord",
    "ReceiptStatus",
    "RecordingSink",
    "Redactor",
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
    "SessionStatus",
    "SessionStore",
    "SessionSuspendedError",
    "Speaker",
    "StepCommit",
    "StepConflictError",
    "StoreError",
    "StoreHandle",
    "StreamRestart",
    "SurfacePolicy",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolMessage",
    "ToolSpec",
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
    "TurnStreamer",
    "UnknownToolError",
    "Usage",
    "UserMessage",
    "grant_answer",
    "grant_confirmation",
    "load_agent",
    "receive",
    "resolve_receipt",
    "tool",
]


def __getattr__(name: str) -> object:
    """The Anthropic adapter is imported on first use: the SDK is heavy and tests rarely need it."""
    if name in ("AnthropicModel", "AnthropicSettings"):
        from agent import anthropic_model

        return getattr(anthropic_model, name)
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
