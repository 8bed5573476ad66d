"""Offline stand-ins for Slack: a Web API server and a signed-request driver.

They ship inside the package (not under tests/) because `bot demo` runs on them from an
installed wheel; the bot's own test suite drives them over real HTTP the same way.
"""

from bot.testing.signing import SlackDriver, sign_request
from bot.testing.standin import SlackStandIn

__all__ = ["SlackDriver", "SlackStandIn", "sign_request"]
