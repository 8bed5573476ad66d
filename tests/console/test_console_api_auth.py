"""The console's door: off without `CONSOLE_TOKENS`, token login to a signed cookie (never the
token), 401 without it, CSRF and same-origin checks on every action, security headers, and
each login, failed login and logout audited without the token. Real HTTP, both databases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent import ScriptedModel
from tests.api.conftest import (  # noqa: F401  (fixtures)
    _loop_never_blocked,
    bots,
    db_url,
    launch,
    picked_db_url,
    standin,
)
from tests.bot.harness import Running
from tests.console.console_fixtures import BY_NAME, Console, console  # noqa: F401
from tests.console.seed import AGENT, T1_TOKEN

API_PATHS = [
    "/console/api/me",
    "/console/api/sessions",
    "/console/api/sessions/slack%3AT1%3AC1DONE%3A1700001000.000100",
    "/console/api/sessions/slack%3AT1%3AC1DONE%3A1700001000.000100/events",
    "/console/api/waiting",
    "/console/api/receipts?status=uncertain",
    "/console/api/stuck?older_than=0",
    "/console/api/daily",
    "/console/api/audit",
]


async def test_off_without_tokens(
    db_url: str,  # noqa: F811
    launch: Callable[..., Awaitable[Running]],  # noqa: F811
) -> None:
    bot = await launch(db_url, AGENT, ScriptedModel(), RUN_TURNS=False)
    assert bot.bot.console is None
    from bot.testing.http import local_client

    async with local_client(base_url=bot.server.url) as client:
        for path in ["/console", *API_PATHS]:
            assert (await client.get(path)).status_code == 404, path
        assert (await client.post("/console/login", data={"token": T1_TOKEN})).status_code == 404
        assert (await client.post("/console/logout")).status_code == 404


async def test_the_page_and_its_headers(console: Console) -> None:  # noqa: F811
    page = await console.client().get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "'unsafe-inline'" not in csp
    nonce = csp.split("'nonce-", 1)[1].split("'", 1)[0]
    assert f'nonce="{nonce}"' in page.text  # the page's own inline script may run
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"
    assert page.headers["cache-control"] == "no-store"
    again = await console.client().get("/console")
    assert nonce not in again.headers["content-security-policy"]  # a fresh nonce each time


async def test_login_sets_a_signed_cookie_and_me_answers(console: Console) -> None:  # noqa: F811
    client = console.client()
    assert (await client.get("/console/api/me")).status_code == 401
    answer = await client.post("/console/login", data={"token": T1_TOKEN})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("console_session=")
    lowered = cookie.lower()
    assert "httponly" in lowered
    assert "samesite=strict" in lowered
    assert "path=/console" in lowered
    assert "secure" not in lowered  # plain http here; https gets Secure
    assert T1_TOKEN not in cookie
    me = await client.get("/console/api/me")
    assert me.status_code == 200
    body = me.json()
    assert (body["name"], body["teams"]) == ("ana", ["T1"])
    assert len(body["csrf"]) >= 32
    root = await console.login("root")
    assert (await root.get("/console/api/me")).json()["teams"] is None


async def test_https_gets_a_secure_cookie(console: Console) -> None:  # noqa: F811
    answer = await console.client().post(
        "/console/login", data={"token": T1_TOKEN}, headers={"X-Forwarded-Proto": "https"}
    )
    assert answer.status_code == 303
    assert "secure" in answer.headers["set-cookie"].lower()


async def test_wrong_token_is_401_and_audited_without_it(console: Console) -> None:  # noqa: F811
    wrong = "console-not-a-token-0123456789"
    client = console.client()
    as_json = await client.post(
        "/console/login", json={"token": wrong}, headers={"Accept": "application/json"}
    )
    assert as_json.status_code == 401
    assert as_json.json() == {"error": "wrong token"}
    as_form = await client.post("/console/login", data={"token": wrong})
    assert as_form.status_code == 401
    assert "/console?error=1" in as_form.text  # the browser is sent back to the login form
    assert "set-cookie" not in as_form.headers
    assert (await client.get("/console/api/me")).status_code == 401
    root = await console.login("root")
    entries = (await root.get("/console/api/audit")).json()["entries"]
    failed = [e for e in entries if e["action"] == "login.failed"]
    assert len(failed) == 2
    assert [e for e in entries if e["action"] == "login" and e["who"] == "root"]
    assert wrong not in (await root.get("/console/api/audit")).text
    for token in BY_NAME.values():
        assert token not in (await root.get("/console/api/audit")).text


async def test_every_api_path_needs_the_cookie(console: Console) -> None:  # noqa: F811
    client = console.client()
    for path in API_PATHS:
        answer = await client.get(path)
        assert answer.status_code == 401, path
        assert answer.json() == {"error": "login"}
    for forged in ["v1.abc.99999999999.deadbeef", T1_TOKEN, ""]:
        client.cookies.set("console_session", forged, path="/console")
        assert (await client.get("/console/api/me")).status_code == 401
    posted = await client.post(
        "/console/api/receipts/resolve",
        json={"session": "x", "key": "y", "outcome": "failed"},
    )
    assert posted.status_code == 401


async def test_actions_need_csrf_and_same_origin(console: Console) -> None:  # noqa: F811
    ana = await console.login("ana")
    t1 = console.seeded.t1
    body = {"session": t1.stuck, "turn_id": t1.stuck_turn, "reason": "csrf test"}
    path = "/console/api/turns/cancel"
    missing = await ana.client.post(path, json=body)
    assert (missing.status_code, missing.json()) == (403, {"error": "csrf"})
    wrong = await ana.client.post(path, json=body, headers={"X-Console-CSRF": "0" * 40})
    assert wrong.status_code == 403
    foreign = await ana.post(path, body, Origin="https://evil.example")
    assert foreign.status_code == 403
    foreign_referer = await ana.post(path, body, Referer="https://evil.example/page")
    assert foreign_referer.status_code == 403
    null_origin = await ana.post(path, body, Origin="null")
    assert null_origin.status_code == 403
    # Another operator's CSRF token does not fit this session.
    bob = await console.login("bob")
    crossed = await ana.client.post(path, json=body, headers={"X-Console-CSRF": bob.csrf})
    assert crossed.status_code == 403
    turns = await console.bot.turns(t1.stuck)
    assert [t.status.value for t in turns] == ["queued"]  # nothing was done
    same = await ana.post(path, body, Origin=console.url)
    assert same.status_code == 200, same.text


async def test_logout_clears_the_cookie_and_is_audited(console: Console) -> None:  # noqa: F811
    ana = await console.login("ana")
    refused = await ana.client.post("/console/logout")
    assert refused.status_code == 403  # CSRF-checked too
    out = await ana.client.post("/console/logout", headers={"X-Console-CSRF": ana.csrf})
    assert out.status_code == 303
    assert 'console_session=""' in out.headers["set-cookie"] or (
        "max-age=0" in out.headers["set-cookie"].lower()
    )
    assert (await ana.get("/console/api/me")).status_code == 401
    root = await console.login("root")
    entries = (await root.get("/console/api/audit")).json()["entries"]
    assert any(e["action"] == "logout" and e["who"] == "ana" for e in entries)
