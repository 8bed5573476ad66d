"""The stand-in's install side is as strict as Slack's: what a wrong exchange or a wrong token
gets, through the same slack-sdk client Bolt uses (https://docs.slack.dev/reference/methods/
oauth.v2.access)."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing import SlackStandIn

CLIENT_ID = "1111.2222"
SECRET = "client-secret-for-tests-0123456789"
REDIRECT = "https://bot.example.test/slack/oauth_redirect"
AUTHORIZE = (
    f"https://slack.com/oauth/v2/authorize?client_id={CLIENT_ID}&scope=chat:write,commands"
    f"&redirect_uri={REDIRECT}&state=s1"
)


@pytest.fixture
def slack(standin: SlackStandIn) -> SlackStandIn:
    standin.oauth.app(client_id=CLIENT_ID, client_secret=SECRET, redirect_uri=REDIRECT)
    standin.oauth.team("T0AAA", channels=("C0AAA",))
    standin.oauth.team("T0BBB", channels=("C0BBB",), enterprise_id="E0ORG")
    return standin


async def error_of(call: object) -> str:
    with pytest.raises(SlackApiError) as refused:
        await call  # type: ignore[misc]
    return str(refused.value.response["error"])


async def test_a_code_is_exchanged_once_for_a_token_of_its_workspace(slack: SlackStandIn) -> None:
    client = AsyncWebClient(base_url=slack.api_url)
    code = slack.oauth.approve(AUTHORIZE, team="T0BBB", user="U0ADMIN")
    answer = await client.oauth_v2_access(
        client_id=CLIENT_ID, client_secret=SECRET, code=code, redirect_uri=REDIRECT
    )
    assert answer["token_type"] == "bot"
    assert answer["scope"] == "chat:write,commands"
    assert answer["team"] == {"id": "T0BBB", "name": "Team T0BBB"}
    assert answer["enterprise"] == {"id": "E0ORG", "name": "Org E0ORG"}
    assert answer["is_enterprise_install"] is False
    assert answer["authed_user"] == {"id": "U0ADMIN"}
    assert answer["app_id"] == slack.app_id
    assert answer["bot_user_id"] == slack.oauth.teams["T0BBB"].bot_user_id
    token = answer["access_token"]
    assert token.startswith("xoxb-")

    assert (
        await error_of(
            client.oauth_v2_access(
                client_id=CLIENT_ID, client_secret=SECRET, code=code, redirect_uri=REDIRECT
            )
        )
        == "invalid_code"
    )
    me = await AsyncWebClient(token=token, base_url=slack.api_url).auth_test()
    assert (me["team_id"], me["enterprise_id"]) == ("T0BBB", "E0ORG")
    assert me["user_id"] == slack.oauth.teams["T0BBB"].bot_user_id


@pytest.mark.parametrize(
    ("client_id", "secret", "redirect", "error"),
    [
        ("9999.0000", SECRET, REDIRECT, "invalid_client_id"),
        (CLIENT_ID, "wrong-secret", REDIRECT, "bad_client_secret"),
        (CLIENT_ID, SECRET, "https://evil.example/cb", "bad_redirect_uri"),
    ],
)
async def test_a_wrong_exchange_is_refused_with_slacks_error(
    slack: SlackStandIn, client_id: str, secret: str, redirect: str, error: str
) -> None:
    client = AsyncWebClient(base_url=slack.api_url)
    code = slack.oauth.approve(AUTHORIZE, team="T0AAA", user="U0ADMIN")
    assert error == await error_of(
        client.oauth_v2_access(
            client_id=client_id, client_secret=secret, code=code, redirect_uri=redirect
        )
    )
    assert slack.oauth.tokens == {}
    assert (
        await error_of(
            client.oauth_v2_access(
                client_id=CLIENT_ID,
                client_secret=SECRET,
                code="never-issued",
                redirect_uri=REDIRECT,
            )
        )
        == "invalid_code"
    )


async def test_an_unknown_or_revoked_token_is_invalid_auth(slack: SlackStandIn) -> None:
    stranger = AsyncWebClient(token="xoxb-made-up", base_url=slack.api_url)
    assert await error_of(stranger.chat_postMessage(channel="C0AAA", text="x")) == "invalid_auth"
    code = slack.oauth.approve(AUTHORIZE, team="T0AAA", user="U0ADMIN")
    answer = await AsyncWebClient(base_url=slack.api_url).oauth_v2_access(
        client_id=CLIENT_ID, client_secret=SECRET, code=code, redirect_uri=REDIRECT
    )
    ours = AsyncWebClient(token=answer["access_token"], base_url=slack.api_url)
    posted = await ours.chat_postMessage(channel="C0AAA", text="hello")
    assert posted["message"]["bot_id"] == slack.oauth.teams["T0AAA"].bot_id
    assert await error_of(ours.chat_postMessage(channel="C0BBB", text="x")) == "channel_not_found"
    slack.oauth.revoke("T0AAA")
    assert await error_of(ours.chat_postMessage(channel="C0AAA", text="x")) == "invalid_auth"
    assert [c.team for c in slack.calls_to("chat.postMessage")] == [None, "T0AAA", "T0AAA", "T0AAA"]
