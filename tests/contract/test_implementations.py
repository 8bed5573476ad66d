"""The contract suites run on every implementation, and keep doing so as implementations come.

Four checks, all static (nothing here needs a service):
- every class in `agent/`, `storage/` or `bot/` that implements a seam is registered below with
  the ids it runs under in its contract suite, so a new store, sink or model cannot ship without
  joining the suite; the store seam is checked role by role (`SessionStore` is its roles'
  composition), so a class implementing one role only joins that role's suites too;
- those ids are the ones the suites are parametrized with (the `store` fixture, `MODELS`,
  `SINKS`);
- every method of a store role is called in that role's own suites, so a method added to a role
  without a contract test, or a role gaining a method another role's suite tests, fails here;
- every test of a suite takes the suite's implementation fixture, so none quietly runs on one
  implementation only (the few exceptions are named, with the reason).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from agent import EventHub, RecordingSink
from agent.seams import (
    Approvals,
    FollowUps,
    Grants,
    Ledgers,
    Retention,
    SessionStore,
    StepLog,
    TurnQueue,
    Votes,
)
from tests.contract.test_event_sink import SINKS
from tests.contract.test_model import MODELS

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = Path(__file__).resolve().parent

STORE_ROLES: dict[str, tuple[type, tuple[str, ...]]] = {
    "TurnQueue": (TurnQueue, ("test_turn_queue.py", "test_session_store.py")),
    "StepLog": (StepLog, ("test_session_store.py", "test_compaction_tail.py")),
    "Approvals": (Approvals, ("test_approval_store.py",)),
    "Votes": (Votes, ("test_votes_store.py",)),
    "FollowUps": (FollowUps, ("test_followups_store.py",)),
    "Grants": (Grants, ("test_grants_store.py",)),
    "Ledgers": (Ledgers, ("test_ledgers.py",)),
    "Retention": (Retention, ("test_prune.py",)),
}
"""Each role of the store seam: its Protocol and the contract suites that test its methods."""

SEAMS = {
    "TurnQueue": "enqueue_turn",
    "StepLog": "commit_local",
    "Approvals": "due_timers",
    "Votes": "cast_vote",
    "FollowUps": "fire_timer",
    "Grants": "add_grant",
    "Ledgers": "prepare_receipt",
    "Retention": "prune_history",
    "EventSink": "emit",
    "Model": "stream",
}
"""A seam (a store role, a sink, a model), and the method whose definition makes a class one of
its implementations (a name no other kind of class defines)."""

STORES = {
    "storage.memory.store.MemoryStore": ("memory",),
    "storage.sql.store.SqlStore": ("sqlite", "postgres"),
}
"""Every `SessionStore`: each implements every role, so each runs every role's suites."""

REGISTERED = {
    **{role: STORES for role in STORE_ROLES},
    "EventSink": {
        "agent._sinks.RecordingSink": ("recording",),
        "agent._sinks.EventHub": ("hub-subscriber", "hub-async-subscriber", "hub-downstream"),
    },
    "Model": {
        "agent.models._scripted.ScriptedModel": ("scripted",),
        "agent.models._anthropic.AnthropicModel": ("anthropic",),
        "bot.core.deferred_model.DeferredModel": ("deferred",),
    },
}

SUITES = {
    "test_session_store.py": "store",
    "test_ledgers.py": "store",
    "test_turn_queue.py": "store",
    "test_compaction_tail.py": "store",
    "test_approval_store.py": "store",
    "test_votes_store.py": "store",
    "test_followups_store.py": "store",
    "test_grants_store.py": "store",
    "test_prune.py": "store",
    "test_model.py": "harness",
    "test_event_sink.py": "probe",
}
"""Each seam's contract suite and the fixture that hands a test one implementation."""

NOT_PER_IMPLEMENTATION = {
    "test_event_sink.py": {
        # What `EventHub` adds to the seam: fan-out to observers that must neither fail nor
        # hold up a turn. No other sink has observers.
        "test_observers_see_only_their_session_and_turn",
        "test_failing_observers_and_sink_leave_the_turn_and_each_other_alone",
        "test_a_quick_async_observer_is_done_before_emit_returns",
        "test_a_stuck_observer_and_sink_neither_block_emit_nor_lose_events",
        "test_a_stuck_observer_does_not_hold_up_a_turn",
        "test_unsubscribing_stops_delivery_including_what_was_held",
    },
    "test_prune.py": {
        # A data migration of the SQL schema (revision 0007) that retention relies on: it is
        # the SQL store's history, which the memory store has none of.
        "test_migration_0007_dates_turns_that_ended_before_it_no_earlier_than_they_did",
    },
}


def _role_methods(role: type) -> set[str]:
    """The methods a role Protocol declares itself (not those it inherits)."""
    return {
        name
        for name, value in vars(role).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def _implementations(seam: str) -> set[str]:
    """`module.Class` for every concrete class under agent/, storage/ and bot/ defining the
    seam's method (the `Protocol`s themselves are not implementations)."""
    method = SEAMS[seam]
    found: set[str] = set()
    for package in ("agent", "storage", "bot"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.ClassDef):
                    continue
                if any(ast.unparse(base).endswith("Protocol") for base in node.bases):
                    continue
                defined = {
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                }
                if method in defined:
                    found.add(f"{module}.{node.name}")
    return found


def _load(name: str) -> type:
    module, _, attribute = name.rpartition(".")
    loaded: type = getattr(importlib.import_module(module), attribute)
    return loaded


def _as_registered(found: set[str], seam: str) -> set[str]:
    """`found`, with a class that is part of a registered implementation (a mixin holding some of
    a store's methods, as `MemoryStore`'s ledgers) replaced by the implementations built on it:
    their suite runs its methods. A part no registered implementation uses stays, and fails."""
    registered = {name: _load(name) for name in REGISTERED[seam]}
    implementations: set[str] = set()
    for name in found:
        part = _load(name)
        built_on = {
            other
            for other, implementation in registered.items()
            if implementation is not part and issubclass(implementation, part)
        }
        implementations |= built_on or {name}
    return implementations


def _store_ids() -> list[str]:
    """The ids of the `store_url` fixture behind `store` (tests/conftest.py)."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "store_url":
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call):
                    for keyword in decorator.keywords:
                        if keyword.arg == "ids":
                            ids: list[str] = ast.literal_eval(keyword.value)
                            return ids
    raise AssertionError("no ids on the store_url fixture in tests/conftest.py")


@pytest.mark.parametrize("seam", sorted(SEAMS))
def test_every_implementation_of_a_seam_is_in_its_contract_suite(seam: str) -> None:
    found = _implementations(seam)
    assert found, f"no implementation of {seam} found: is the method name in SEAMS right?"
    found = _as_registered(found, seam)
    assert found == set(REGISTERED[seam]), (
        f"{seam}: implementations {sorted(found)}, registered for the contract suite "
        f"{sorted(REGISTERED[seam])}; add a new one to its suite and to REGISTERED"
    )


def test_the_registered_ids_are_the_ones_the_suites_run_with() -> None:
    ran_with = {
        **{role: set(_store_ids()) for role in STORE_ROLES},
        "EventSink": set(SINKS),
        "Model": set(MODELS),
    }
    for seam, implementations in REGISTERED.items():
        for name, ids in implementations.items():
            missing = set(ids) - ran_with[seam]
            assert not missing, f"{name}: its {seam} contract ids {sorted(missing)} never run"
    sinks = {type(make().sink) for make in SINKS.values()}
    assert sinks == {RecordingSink, EventHub}


def test_the_store_seam_is_its_roles_and_each_method_has_one_role() -> None:
    """`SessionStore` is exactly the roles checked here, and its methods (but `close`) are split
    among them with none in two, so checking role by role checks the whole store."""
    bases = {base for base in SessionStore.__bases__ if base.__name__ != "Protocol"}
    assert bases == {role for role, _ in STORE_ROLES.values()}
    seen: dict[str, str] = {}
    for name, (role, _) in STORE_ROLES.items():
        assert SEAMS[name] in _role_methods(role), (
            f"{name}: its marker {SEAMS[name]} is not its own"
        )
        for method in _role_methods(role):
            assert method not in seen, f"{method} is in both {seen[method]} and {name}"
            seen[method] = name
    assert _role_methods(SessionStore) == {"close"}, "a store method outside every role"


@pytest.mark.parametrize("role", sorted(STORE_ROLES))
def test_every_method_of_a_store_role_is_called_in_its_suites(role: str) -> None:
    protocol, suites = STORE_ROLES[role]
    called: set[str] = set()
    for suite in suites:
        assert suite in SUITES, f"{suite} is not a registered suite"
        for node in ast.walk(ast.parse((CONTRACT / suite).read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called.add(node.func.attr)
    untested = sorted(_role_methods(protocol) - called)
    assert not untested, f"{role}: methods no test of {list(suites)} calls: {untested}"


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_test_of_a_suite_runs_per_implementation(suite: str) -> None:
    fixture = SUITES[suite]
    tree = ast.parse((CONTRACT / suite).read_text())
    tests = {
        node.name: {arg.arg for arg in node.args.args}
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }
    assert tests, f"no tests found in {suite}"
    exempt = NOT_PER_IMPLEMENTATION.get(suite, set())
    alone = sorted(
        name for name, args in tests.items() if fixture not in args and name not in exempt
    )
    assert not alone, f"{suite}: tests that do not take `{fixture}`, so run on one implementation"
    stale = sorted(exempt - set(tests))
    assert not stale, f"exempt tests that no longer exist: {stale}"
