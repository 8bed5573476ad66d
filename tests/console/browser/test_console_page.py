"""The operator console in a real browser, against a real `bot serve` on a seeded database (see
conftest): signing in (a wrong token refused), every view with a screenshot, the search, a
session's timeline with a tool step opened (its secret scrubbed), resolving an uncertain receipt
and cancelling a stuck turn from the page (the database then says so, and the audit view lists
both), a turn run through the engine by another process appearing on the open page without a
reload, an operator of one workspace seeing nothing of another's, and signing out. No request
leaves 127.0.0.1 (the `console` fixture fails the test otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Runtime, ScriptedModel, ScriptedReply
from storage import SqlStore
from tests.console import seed
from tests.console.browser.conftest import Console, Served, run_async

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

LIVE_TURN = "t1-live-turn"
LIVE_REPLY = "Order o-1 was delivered this morning."
REASON = "nobody runs this workspace's turns"


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def api_status(page: Any, path: str) -> int:
    """The status the page's own session gets for `path` (its cookie, same origin)."""
    return int(page.evaluate("p => fetch(p).then(r => r.status)", path))


def api_json(page: Any, path: str) -> Any:
    return page.evaluate("p => fetch(p).then(r => r.json())", path)


def rows_with(page: Any, text: str) -> Any:
    return page.locator("#view tbody tr", has_text=text)


def test_signing_in_and_out(console: Console) -> None:
    page = console.page()
    page.goto(console.base + "/console")
    expect(page.locator("#token")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    console.shot(page, "login")

    page.fill("#token", "not-a-console-token")
    page.click("#login button[type=submit]")
    expect(page.locator("#login-error")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    assert api_status(page, "/console/api/me") == 401
    console.shot(page, "login-refused")

    page.fill("#token", seed.ADMIN_TOKEN)
    page.click("#login button[type=submit]")
    expect(page.locator("#who")).to_contain_text("root")
    expect(page.locator("#view h1")).to_have_text("Sessions")
    assert seed.ADMIN_TOKEN not in page.content()

    page.click("#logout")
    expect(page.locator("#token")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    assert api_status(page, "/console/api/me") == 401
    page.reload()
    expect(page.locator("#token")).to_be_visible()


def test_sessions_search_and_a_timeline(console: Console, served: Served) -> None:
    t1, t2 = served.seeded.t1, served.seeded.t2
    page = console.login(seed.ADMIN_TOKEN)
    table = page.locator("#view tbody")
    for key in (*t1.sessions, *t2.sessions):
        expect(table.locator(f'tr[data-key="{key}"]')).to_have_count(1)
    console.shot(page, "sessions")

    # Paging: four at a time, newest change first, each session on exactly one page.
    page.goto(console.base + "/console#/sessions?limit=4")
    seen: list[str] = []
    for _ in range(3):
        expect(table.locator("tr").first).to_be_visible()
        keys = table.locator("tr").evaluate_all("rows => rows.map(r => r.dataset.key)")
        assert keys
        assert not set(keys) & set(seen), (keys, seen)
        seen += keys
        if len(seen) == 10:
            break
        first = keys[0]
        page.click("#older")
        expect(table.locator(f'tr[data-key="{first}"]')).to_have_count(0)
    assert sorted(seen) == sorted([*t1.sessions, *t2.sessions])
    expect(page.locator("#older")).to_have_count(0)
    page.click("#newest")
    expect(table.locator("tr")).to_have_count(4)
    page.goto(console.base + "/console#/sessions")
    expect(table.locator("tr")).to_have_count(10)

    # By channel, by turn id, by the user who spoke; and by status.
    page.fill("#search", "C1DONE")
    page.click("#view form button[type=submit]")
    expect(table.locator("tr")).to_have_count(1)
    expect(table.locator(f'tr[data-key="{t1.done}"]')).to_be_visible()
    page.fill("#search", t2.parked_turn)
    page.click("#view form button[type=submit]")
    expect(table.locator("tr")).to_have_count(1)
    expect(table.locator(f'tr[data-key="{t2.parked}"]')).to_be_visible()
    page.fill("#search", t1.speaker)
    page.click("#view form button[type=submit]")
    expect(table.locator(f'tr[data-key="{t1.done}"]')).to_be_visible()
    expect(table.locator('tr[data-key^="slack:T2:"]')).to_have_count(0)
    console.shot(page, "sessions-search")
    page.fill("#search", "")
    page.select_option("#status", "suspended")
    expect(table.locator(f'tr[data-key="{t1.parked}"]')).to_be_visible()
    expect(table.locator(f'tr[data-key="{t1.done}"]')).to_have_count(0)
    page.fill("#search", "no-such-channel-or-user")
    page.click("#view form button[type=submit]")
    expect(page.locator("#view .empty")).to_have_text("No session matches.")

    # The finished conversation's timeline: model, tool, model; the tool step's arguments and
    # result opened, the token in them scrubbed.
    page.goto(console.base + "/console#/sessions")
    page.click(f'#view a[href="#/session/{_quoted(t1.done)}"]')
    expect(page.locator("#session-key")).to_have_text(t1.done)
    turn = page.locator(f'.turn[data-turn="{t1.done_turn}"]')
    expect(turn.locator(".badge.completed")).to_be_visible()
    expect(turn.locator(".step.model")).to_have_count(2)
    tool = turn.locator(".step.tool")
    expect(tool).to_contain_text("lookup_order")
    expect(tool.locator(".duration")).not_to_have_text("—")
    expect(turn.locator(".step.model .tokens").first).to_contain_text("in 120")
    tool.locator("details.arguments summary").click()
    tool.locator("details.result summary").click()
    expect(tool.locator("details.arguments pre")).to_be_visible()
    expect(tool.locator("details.arguments pre")).to_contain_text('"order": "o-1"')
    expect(tool.locator("details.result pre")).to_contain_text("shipped")
    expect(turn.locator(".events li").first).to_be_visible()
    expect(page.locator("#live")).to_have_text("live")
    slack = page.get_by_role("link", name="Open the Slack thread")
    expect(slack).to_have_attribute("href", "https://slack.com/app_redirect?team=T1&channel=C1DONE")
    assert seed.SECRET not in page.content()
    console.shot(page, "timeline-full")
    page.evaluate("window.scrollTo(0, 0)")
    console.shot(page, "timeline", full=False)  # 1280 by 800: docs/console.png


def test_what_waits_the_daily_chart_and_errors(console: Console, served: Served) -> None:
    t1, t2 = served.seeded.t1, served.seeded.t2
    page = console.login(seed.ADMIN_TOKEN)
    page.click('nav a[data-view="waiting"]')
    expect(page.locator("#view h1")).to_have_text("Waiting for a person")
    for team in (t1, t2):
        parked = page.locator(f'#view tbody tr[data-turn="{team.parked_turn}"]')
        expect(parked).to_contain_text("refund_order")
        expect(parked).to_contain_text(team.speaker)  # who may answer
    console.shot(page, "waiting")

    page.click('nav a[data-view="daily"]')
    expect(page.locator("#view h1")).to_contain_text("per day")
    expect(page.locator('svg rect[data-series="ok"]').first).to_be_visible()
    expect(page.locator('svg rect[data-series="failed"]').first).to_be_attached()
    expect(page.locator('svg rect[data-series="input_tokens"]').first).to_be_visible()
    expect(page.locator("#view tbody tr").first).to_be_visible()
    console.shot(page, "daily")

    # A session that is not there: a message, not a blank page.
    page.goto(console.base + "/console#/session/" + _quoted("slack:T1:C9NONE:1.000100"))
    expect(page.locator("#error")).to_contain_text("Not found")
    console.shot(page, "not-found")


def test_an_uncertain_receipt_is_resolved_from_the_page(console: Console, served: Served) -> None:
    t1 = served.seeded.t1
    page = console.login(seed.ADMIN_TOKEN)
    page.click('nav a[data-view="receipts"]')
    row = rows_with(page, t1.paying)
    expect(row).to_contain_text(t1.receipt_key)
    expect(row.locator(".badge.uncertain")).to_be_visible()
    expect(rows_with(page, served.seeded.t2.paying)).to_have_count(1)
    console.shot(page, "receipts")

    # A second thought: the confirm step's Cancel sends nothing.
    row.locator('button[data-outcome="failed"]').click()
    expect(page.locator(".confirm")).to_contain_text("as failed?")
    page.locator(".confirm button", has_text="Cancel").click()
    expect(page.locator(".confirm")).to_have_count(0)
    row.locator('button[data-outcome="failed"]').click()
    page.keyboard.press("Escape")  # the same from the keyboard
    expect(page.locator(".confirm")).to_have_count(0)
    expect(row.locator(".badge.uncertain")).to_be_visible()

    row.locator('button[data-outcome="completed"]').click()
    note = "checked the gateway: charged once"
    page.fill("#confirm-text", note)
    console.shot(page, "receipts-confirm")
    page.click('[data-confirm="yes"]')
    expect(page.locator("#notice")).to_contain_text("resolved as completed")
    expect(rows_with(page, t1.paying)).to_have_count(0)
    console.shot(page, "receipts-resolved")

    assert _receipt_status(served.db_url, t1.paying, t1.receipt_key) == "completed"
    listed = api_json(page, "/console/api/receipts?status=uncertain")["receipts"]
    assert t1.paying not in [r["session"] for r in listed]

    page.click('nav a[data-view="audit"]')
    entry = rows_with(page, t1.receipt_key)
    expect(entry).to_contain_text("root")
    expect(entry).to_contain_text("completed")
    console.shot(page, "audit")


def _receipt_status(db_url: str, session: str, key: str) -> str:
    async def stored() -> Any:
        store = await SqlStore.open(db_url)
        try:
            return await store.get_receipt(session, key)
        finally:
            await store.close()

    receipt = run_async(stored())
    assert receipt is not None
    return str(receipt.status)


def test_a_stuck_turn_is_cancelled_from_the_page(console: Console, served: Served) -> None:
    t1 = served.seeded.t1
    page = console.login(seed.ADMIN_TOKEN)
    page.click('nav a[data-view="stuck"]')
    expect(page.locator("#view h1")).to_have_text("Stuck turns")
    page.fill("#older-than", "0")  # the seeded turn was queued seconds ago
    page.click("#view form button[type=submit]")
    row = page.locator(f'#view tbody tr[data-turn="{t1.stuck_turn}"]')
    expect(row).to_contain_text("queued")
    console.shot(page, "stuck")

    row.locator('button[data-action="cancel"]').click()
    page.fill("#confirm-text", REASON)
    page.click('[data-confirm="yes"]')
    expect(page.locator("#notice")).to_contain_text(f"Turn {t1.stuck_turn} cancelled")
    expect(page.locator(f'#view tbody tr[data-turn="{t1.stuck_turn}"]')).to_have_count(0)
    expect(
        page.locator(f'#view tbody tr[data-turn="{served.seeded.t2.stuck_turn}"]')
    ).to_be_visible()
    console.shot(page, "stuck-cancelled")

    # Asked to stop: a queued turn ends as cancelled when a worker next takes it (this server
    # runs none); the request, with its reason, is on the turn now.
    session = api_json(page, "/console/api/sessions/" + _quoted(t1.stuck))
    turn = next(t for t in session["turns"] if t["turn_id"] == t1.stuck_turn)
    assert turn["cancel_reason"] == REASON
    page.goto(console.base + "/console#/session/" + _quoted(t1.stuck))
    expect(page.locator(f'.turn[data-turn="{t1.stuck_turn}"]')).to_contain_text(REASON)
    page.click('nav a[data-view="audit"]')
    expect(rows_with(page, t1.stuck_turn)).to_contain_text("root")


def test_a_turn_run_elsewhere_appears_without_a_reload(console: Console, served: Served) -> None:
    t1 = served.seeded.t1
    page = console.login(seed.ADMIN_TOKEN)
    page.goto(console.base + "/console#/session/" + _quoted(t1.done))
    expect(page.locator(f'.turn[data-turn="{t1.done_turn}"]')).to_be_visible()
    expect(page.locator("#live")).to_have_text("live")
    page.evaluate("window.stillThisPage = true")

    run_async(_run_turn(served.db_url, t1))

    done = page.locator(f'#live-events li[data-type="turn.completed"][data-turn="{LIVE_TURN}"]')
    expect(done).to_be_visible()
    # What the timeline showed already is not repeated as news.
    expect(page.locator(f'#live-events li[data-turn="{t1.done_turn}"]')).to_have_count(0)
    live = page.locator(f'.turn[data-turn="{LIVE_TURN}"]')
    expect(live.locator(".badge.completed")).to_be_visible()
    expect(live.locator(".step.model .text")).to_contain_text(LIVE_REPLY)
    assert page.evaluate("window.stillThisPage") is True
    console.shot(page, "live")


async def _run_turn(db_url: str, team: seed.TeamSeed) -> None:
    """A turn on the open session, through the engine, from this process (not the server)."""
    _, _, channel, ts = team.done.split(":")
    store = await SqlStore.open(db_url)
    runtime = Runtime(store, ScriptedModel([ScriptedReply(text=LIVE_REPLY)]), agent=seed.AGENT)
    try:
        said = seed.said(team.team, channel, ts, team.speaker, "and where is it now?")
        await runtime.session(seed.AGENT, team.done).turn(said, turn_id=LIVE_TURN)
    finally:
        await runtime.close()
        await store.close()


def test_a_one_workspace_operator_sees_nothing_of_another(console: Console, served: Served) -> None:
    t1, t2 = served.seeded.t1, served.seeded.t2
    page = console.login(seed.T2_TOKEN)
    expect(page.locator("#who")).to_contain_text("bob")
    table = page.locator("#view tbody")
    expect(table.locator(f'tr[data-key="{t2.done}"]')).to_be_visible()
    expect(table.locator('tr[data-key^="slack:T1:"]')).to_have_count(0)
    page.fill("#search", "C1DONE")
    page.click("#view form button[type=submit]")
    expect(page.locator("#view .empty")).to_be_visible()
    console.shot(page, "t2-sessions")

    for view, marker in (("waiting", t2.parked_turn), ("stuck?older_than=0", t2.stuck_turn)):
        page.goto(f"{console.base}/console#/{view}")
        expect(page.locator(f'#view tbody tr[data-turn="{marker}"]')).to_be_visible()
        expect(page.locator("#view tbody")).not_to_contain_text("slack:T1:")
    # bob resolves his own workspace's receipt, as failed; T1's is not his to see.
    page.goto(console.base + "/console#/receipts")
    expect(page.locator("#view h1")).to_have_text("Uncertain receipts")
    expect(page.locator("#view")).not_to_contain_text("slack:T1:")
    rows_with(page, t2.paying).locator('button[data-outcome="failed"]').click()
    page.fill("#confirm-text", "the gateway has no such charge")
    page.click('[data-confirm="yes"]')
    expect(page.locator("#notice")).to_contain_text("resolved as failed")
    assert _receipt_status(served.db_url, t2.paying, t2.receipt_key) == "failed"
    assert _receipt_status(served.db_url, t1.paying, t1.receipt_key) != "failed"
    page.click('nav a[data-view="audit"]')
    expect(rows_with(page, t2.paying)).to_contain_text("bob")
    expect(page.locator("#view")).not_to_contain_text("slack:T1:")

    page.goto(console.base + "/console#/session/" + _quoted(t1.done))
    expect(page.locator("#error")).to_contain_text("Not found")
    expect(page.locator(".turn")).to_have_count(0)
    assert t1.done_turn not in page.content()
    console.shot(page, "t2-not-found")
    assert api_status(page, "/console/api/sessions/" + _quoted(t1.done)) == 404
    assert api_status(page, "/console/api/sessions/" + _quoted(t1.done) + "/events") == 404


def _quoted(key: str) -> str:
    """`encodeURIComponent`, as the page builds its links."""
    from urllib.parse import quote

    return quote(key, safe="-_.!~*'()")
