"""The sandbox page in a real browser, against a real `bot sandbox` process: a person types as
one of the demo users, sees the reply streaming with its tool timeline, answers the approval
(refused for someone not allowed), stops a long tool call, denies with a reason and opens the
Home inbox; every click is a signed Slack request the bot decides, and the page shows what the
stand-in then holds. One screenshot per step (see conftest), among them each way a call ends:
approved, stopped, denied. (An expiry cannot be driven here: the sandbox's requests have no
time limit; `tests/bot/test_timeline_truth.py` shows that ending.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.slack.approval_blocks import APPROVE, DENY

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

WAIT_MS = 45_000
"""Generous: the machine may be busy; every wait is on a condition, never a fixed time."""
OPENING = "order 42 arrived broken, can you sort it out?"
TRACKING = "where is the replacement for order 42?"
DENIED = "order 7 arrived broken, please refund it"
REASON = "the customer already got a voucher"

RECORD_STREAM = """() => {
  window.streamed = [];
  new MutationObserver(() => {
    for (const m of document.querySelectorAll('#thread-body .msg[data-streaming="true"] .text')) {
      const text = m.innerText.trim();
      if (text && window.streamed[window.streamed.length - 1] !== text) window.streamed.push(text);
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
"""Every text a streaming reply showed, as the page drew it."""


class Steps:
    def __init__(self, page: Any, where: Path) -> None:
        self.page, self.where, self.n = page, where, 0

    def shot(self, name: str) -> None:
        self.n += 1
        self.page.screenshot(path=str(self.where / f"{self.n:02d}-{name}.png"), full_page=True)


def test_a_person_clicks_through_the_bot_in_a_browser(
    page: Any, sandbox_url: str, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    steps = Steps(page, screenshots)
    page.goto(sandbox_url + "/")
    expect(page.locator("#as")).to_have_value("U0ALICE")
    thread = page.locator("#thread-body")

    # alice asks; the reply streams into a thread with its tool timeline, then the approval.
    # (Its stream lasts a few seconds, which a starved browser may not poll within: the page
    # showing a reply while it streams is seen below, where a slow tool keeps it open.)
    say(page, OPENING)
    approval = thread.locator(".msg").filter(has=page.locator(f'[data-action-id="{APPROVE}"]'))
    expect(approval).to_contain_text("Approve a $18.50 refund on order 42?")
    approval = thread.locator(f'.msg[data-ts="{approval.get_attribute("data-ts")}"]')
    reply = thread.locator('.msg[data-bot="true"]').first
    expect(reply.locator(".task", has_text="Lookup order")).to_have_attribute(
        "data-status", "complete"
    )
    waiting = reply.locator('.task[data-task="call_refund"]')
    expect(waiting).to_contain_text("waiting for approval")
    expect(waiting).to_have_attribute("data-status", "pending")
    expect(page.locator("#session-status")).to_have_text("suspended")
    steps.shot("approval")

    # The Home inbox lists it for alice (who may answer), and nothing for bob.
    page.click("#nav-home")
    home = page.locator("#home-body")
    expect(home).to_contain_text("Approve a $18.50 refund on order 42?")
    expect(home.locator(f'[data-action-id="{APPROVE}"]')).to_be_visible()
    steps.shot("home-alice")
    speak_as(page, "U0BOB")
    expect(home).to_contain_text("Nothing is waiting for your answer.")
    expect(home.locator(f'[data-action-id="{APPROVE}"]')).to_have_count(0)
    steps.shot("home-bob")

    # bob clicks Approve in the thread: refused, told only to him, nothing applied.
    page.click('[data-nav="channel"][data-channel="C0DEMO"]')
    click_approve(page, approval)
    refusal = thread.locator(".msg.ephemeral")
    expect(refusal).to_contain_text("You can't answer this request")
    expect(refusal).to_contain_text("Only visible to you")
    steps.shot("refused-for-bob")
    expect(approval.locator(f'[data-action-id="{APPROVE}"]')).to_be_visible()
    expect(page.locator("#session-status")).to_have_text("suspended")
    expect(thread).not_to_contain_text("Approved by")
    speak_as(page, "U0ALICE")
    expect(thread.locator(".msg.ephemeral")).to_have_count(0)

    # alice approves: the final reply.
    click_approve(page, approval)
    expect(thread).to_contain_text("$18.50 was refunded on order 42.")
    expect(approval).to_contain_text("Approved by @alice")
    expect(approval.locator(f'[data-action-id="{APPROVE}"]')).to_have_count(0)
    expect(page.locator("#session-status")).to_have_text("active")
    # The message the turn parked in says how its request ended; the call's own card, in the
    # message that goes on, says it ran. Neither is left "waiting", and both are cards.
    refund = thread.locator('.task[data-task="call_refund"]')
    expect(refund).to_have_count(2)
    for n in range(2):
        expect(refund.nth(n)).to_have_attribute("data-status", "complete")
    expect(refund.first).to_contain_text("approved by @alice")
    expect(thread).not_to_contain_text("waiting for approval")
    steps.shot("approved")

    # A follow-up in the thread: the scripted model echoes what it has no script for.
    page.fill("#reply-text", "thanks, that's all")
    page.click("#reply button[type=submit]")
    expect(thread).to_contain_text("You wrote: “thanks, that's all”.")
    expect(page.locator("#session-status")).to_have_text("active")
    steps.shot("follow-up")

    # A second thread: the carrier is slow (the reply streams while it waits); alice stops it.
    page.evaluate(RECORD_STREAM)
    say(page, TRACKING)
    streaming = thread.locator('.msg[data-streaming="true"]')
    expect(streaming).to_be_visible()
    expect(streaming).to_contain_text("Let me ask the carrier")
    steps.shot("reply-streaming")
    expect(thread.locator(".task", has_text="Track shipment")).to_have_attribute(
        "data-status", "in_progress"
    )
    # The model's words are all in (the tool runs after them); what the page drew while the
    # reply streamed was always the start of them, never anything else.
    final_text = streaming.locator(".text").first.inner_text().strip()
    streamed = page.evaluate("window.streamed")
    assert streamed, "the page never drew the reply while it streamed"
    assert all(final_text.startswith(s.rstrip("…").strip()) for s in streamed), streamed
    expect(page.locator("#stop")).to_be_visible()
    steps.shot("long-tool-running")
    page.click("#stop")
    expect(thread).to_contain_text("stopped by @alice")
    expect(page.locator("#session-status")).to_have_text("active")
    expect(page.locator("#stop")).to_have_count(0)
    # The call the Stop cut short is a card that says so, not "✓ Track shipment" in the text.
    tracked = thread.locator('.tasks .task[data-task="call_track"]')
    expect(tracked).to_have_attribute("data-status", "error")
    expect(tracked).to_contain_text("stopped by @alice")
    expect(thread.locator(".text", has_text="✓ Track shipment")).to_have_count(0)
    steps.shot("stopped")

    # A third: alice denies the refund with a reason; the request and the reply show it.
    say(page, DENIED)
    approval = thread.locator(".msg").filter(has=page.locator(f'[data-action-id="{DENY}"]'))
    expect(approval).to_contain_text("refund on order 7?")
    approval = thread.locator(f'.msg[data-ts="{approval.get_attribute("data-ts")}"]')
    approval.locator(f'[data-action-id="{DENY}"]').click()
    modal = page.get_by_role("dialog", name="Deny this request")
    expect(modal).to_be_visible()
    modal.locator("textarea").fill(REASON)
    steps.shot("deny-reason")
    page.click("#modal-submit")
    expect(modal).to_have_count(0)
    expect(approval).to_contain_text(f"Denied by @alice: {REASON}")
    expect(thread).to_contain_text(
        f"no refund on order 7; the replacement mug still ships. You said: “{REASON}”"
    )
    # Denied in both of its messages: where it waited, and where the turn went on.
    refused = thread.locator('.task[data-task="call_refund"]')
    expect(refused).to_have_count(2)
    for n in range(2):
        expect(refused.nth(n)).to_have_attribute("data-status", "error")
        expect(refused.nth(n)).to_contain_text(f"denied by @alice: {REASON}")
    steps.shot("denied")

    # carol asks too, and approves from her Home tab: the click takes the thread click's path.
    speak_as(page, "U0CAROL")
    say(page, "refund order 5, it arrived cracked")
    expect(thread.locator(f'[data-action-id="{APPROVE}"]')).to_be_visible()
    page.click("#nav-home")
    expect(home).to_contain_text("Approve a $18.50 refund on order 5?")
    click_approve(page, home)
    expect(home).to_contain_text("Nothing is waiting for your answer.")
    expect(thread).to_contain_text("$18.50 was refunded on order 5.")
    expect(thread).to_contain_text("Approved by @carol")
    steps.shot("approved-from-home")
    assert len(list(screenshots.glob("*.png"))) == steps.n


COLOURED_PIXELS = """() => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 48;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  ctx.font = '32px ' + getComputedStyle(document.body).fontFamily;
  ctx.textBaseline = 'top';
  const counts = {};
  for (const emoji of new Set(Object.values(EMOJI))) {
    ctx.clearRect(0, 0, 48, 48);
    ctx.fillStyle = '#000';
    ctx.fillText(emoji, 4, 4);
    const px = ctx.getImageData(0, 0, 48, 48).data;
    let coloured = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (px[i + 3] > 128 && Math.max(px[i], px[i + 1], px[i + 2])
          - Math.min(px[i], px[i + 1], px[i + 2]) > 60) coloured++;
    }
    counts[emoji] = coloured;
  }
  return counts;
}"""
"""How many strongly coloured pixels each of the page's emoji draws in its own font stack, in
black ink: a colour emoji font paints them; a missing one leaves an empty box or a monochrome
outline, none."""


def test_the_pages_emoji_render_in_colour(page: Any, sandbox_url: str) -> None:
    """The screenshots show reactions and status marks as the person sees them: with no colour
    emoji font installed (CI's `.ci/run` installs `fonts-noto-color-emoji`) they were empty
    boxes. Drawn in black, a glyph with colour in it came from a colour emoji font."""
    page.goto(sandbox_url + "/")
    counts: dict[str, int] = page.evaluate(COLOURED_PIXELS)
    assert len(counts) >= 8, counts
    missing = sorted(emoji for emoji, coloured in counts.items() if coloured < 20)
    assert missing == [], (
        f"no colour emoji font draws {missing} (Debian: apt-get install fonts-noto-color-emoji)"
    )


def test_the_page_refuses_what_slack_would_not_send(sandbox_url: str) -> None:
    """Bad input is a 4xx naming what is wrong; a button the stand-in does not hold is a 404;
    nothing reaches the bot."""
    with httpx.Client(base_url=sandbox_url, timeout=30) as http:
        junk = {"Content-Type": "application/json"}
        assert http.post("/api/say", content=b"not json", headers=junk).status_code == 400
        assert http.post("/api/say", content=b"\xff", headers=junk).status_code == 400
        form = {"Content-Type": "text/plain"}
        body = b'{"as": "U0ALICE", "channel": "C0DEMO", "text": "hi"}'
        assert http.post("/api/say", content=body, headers=form).status_code == 415
        elsewhere = {"Host": "sandbox.example.com"}
        assert (
            http.get("/api/state", params={"as": "U0ALICE"}, headers=elsewhere).status_code == 400
        )
        unknown = http.post("/api/say", json={"as": "U0MALLORY", "channel": "C0DEMO", "text": "hi"})
        assert unknown.status_code == 400
        assert "unknown person" in unknown.json()["error"]
        empty = http.post("/api/say", json={"as": "U0ALICE", "channel": "C0DEMO", "text": " "})
        assert empty.status_code == 400
        nowhere = http.post("/api/say", json={"as": "U0ALICE", "channel": "C0NOPE", "text": "hi"})
        assert nowhere.status_code == 400
        made_up = http.post(
            "/api/click",
            json={
                "as": "U0BOB",
                "channel": "C0DEMO",
                "message_ts": "1.000001",
                "action_id": APPROVE,
            },
        )
        assert made_up.status_code == 404
        state = http.get("/api/state", params={"as": "U0ALICE"}).json()
        said = [m["text"] for c in state["channels"] for m in c["messages"]]
        assert not any(text.endswith(" hi") for text in said)


def say(page: Any, text: str) -> None:
    """Type a message in the channel's composer and send it (it opens the new thread)."""
    page.click('[data-nav="channel"][data-channel="C0DEMO"]')
    page.fill("#say-text", text)
    page.press("#say-text", "Enter")


def speak_as(page: Any, user: str) -> None:
    page.select_option("#as", user)


def click_approve(page: Any, approval: Any) -> None:
    """Approve asks first (the button's `confirm` dialog), as Slack does."""
    approval.locator(f'[data-action-id="{APPROVE}"]').click()
    page.get_by_role("dialog", name="Approve this request?").get_by_role(
        "button", name="Approve"
    ).click()
