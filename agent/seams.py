"""What a store, a model adapter, a sink or a dispatcher author needs: the engine's seams.

The engine stands on three: everything it persists goes through `SessionStore` (composed of
one Protocol per role: `TurnQueue`, `StepLog`, `Approvals`, `Votes`, `FollowUps`, `Grants`,
`Ledgers`, `Retention`), everything it shows live through `EventSink`, every model call through
`Model`.
Between processes it can also use a `Dispatcher` (who runs which turn, now) and an `EventRelay`
(live events from elsewhere).

Besides the Protocols, this module is where an implementation finds everything it handles: the
records crossing the store seam (frozen dataclasses, so a store needs nothing of the engine's
workings), the messages and events it stores with their JSON codecs (serialised at the storage
boundary only), the answerers a confirmation row holds with theirs, the errors a store raises,
and the redactor for drivers' error texts. `parked_request` reads the typed request out of a
session's raw `pending` checkpoint, for code that holds a `SessionRecord`. `storage/` imports
nothing else of `agent` (`tests/unit/test_import_direction.py`).
"""

from __future__ import annotations

from agent._errors import (
    FatalToolError,
    LeaseLostError,
    ResumeConflictError,
    SchemaMismatchError,
    SessionSuspendedError,
    StepConflictError,
    StoreError,
    StoreUnavailableError,
)
from agent._event_seams import (
    Dispatcher,
    DispatchTarget,
    EventRelay,
    EventSink,
    RelayHost,
    RelayHub,
)
from agent._events import (
    MessageDelta,
    ProgressUpdated,
    TurnCancelled,
    TurnEvent,
    event_from_json,
    event_to_json,
)
from agent._hitl_answerers import Answerer, answerers_from_json, answerers_to_json
from agent._hitl_requests import parked_request, parked_requests
from agent._messages import (
    ContentBlock,
    JsonValue,
    Message,
    Usage,
    holds_compaction,
    message_from_json,
    message_to_json,
)
from agent._model_seam import (
    Model,
    ModelEvent,
    ModelReply,
    ModelRequest,
    ModelSettings,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
    ToolSpec,
    model_compacts,
)
from agent._records import (
    UNFINISHED,
    ApprovalTimer,
    ArchivedGeneration,
    CancelReason,
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    Lease,
    PruneCounts,
    ReceiptRecord,
    ReceiptStatus,
    SessionRecord,
    SessionStatus,
    StepCommit,
    TimerAction,
    TimerKind,
    TranscriptTail,
    TurnKind,
    TurnRecord,
    TurnStatus,
)
from agent._redaction import Redactor
from agent._store_seam import (
    Approvals,
    FollowUps,
    GrantRecord,
    Grants,
    GrantScope,
    Ledgers,
    Retention,
    SessionStore,
    StepLog,
    StoreHandle,
    TurnQueue,
    VoteRecord,
    Votes,
)
from agent._turn_input import TurnInput

__all__ = [
    "UNFINISHED",
    "Answerer",
    "ApprovalTimer",
    "Approvals",
    "ArchivedGeneration",
    "CancelReason",
    "ConfirmationRecord",
    "ConfirmationStatus",
    "ContentBlock",
    "DispatchTarget",
    "Dispatcher",
    "EventRelay",
    "EventSink",
    "FactRecord",
    "FatalToolError",
    "FollowUps",
    "GrantRecord",
    "GrantScope",
    "Grants",
    "JsonValue",
    "Lease",
    "LeaseLostError",
    "Ledgers",
    "Message",
    "MessageDelta",
    "Model",
    "ModelEvent",
    "ModelReply",
    "ModelRequest",
    "ModelSettings",
    "ProgressUpdated",
    "PruneCounts",
    "ReceiptRecord",
    "ReceiptStatus",
    "Redactor",
    "RelayHost",
    "RelayHub",
    "ResumeConflictError",
    "Retention",
    "SchemaMismatchError",
    "SessionRecord",
    "SessionStatus",
    "SessionStore",
    "SessionSuspendedError",
    "StepCommit",
    "StepConflictError",
    "StepLog",
    "StoreError",
    "StoreHandle",
    "StoreUnavailableError",
    "StreamRestart",
    "TextDelta",
    "ThinkingDelta",
    "TimerAction",
    "TimerKind",
    "ToolSpec",
    "TranscriptTail",
    "TurnCancelled",
    "TurnEvent",
    "TurnInput",
    "TurnKind",
    "TurnQueue",
    "TurnRecord",
    "TurnStatus",
    "Usage",
    "VoteRecord",
    "Votes",
    "answerers_from_json",
    "answerers_to_json",
    "event_from_json",
    "event_to_json",
    "holds_compaction",
    "message_from_json",
    "message_to_json",
    "model_compacts",
    "parked_request",
    "parked_requests",
]
