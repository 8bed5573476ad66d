"""`bot sandbox`: the offline Slack path behind a local web page a person can click through.

One process runs the Slack stand-in, the bot (on a temporary SQLite database, the demo agent,
the scripted model of `bot.cli.sandbox.script`) served by uvicorn, the signed-request driver, and
the page (`bot.cli.sandbox.page_app`, `page.html`) on 127.0.0.1. The page renders the stand-in's
record (messages, streams, tool timelines, approvals, ephemerals, agent sessions, Home views,
modals) and plays each click through the driver as a signed Slack request. No token, no
network.
"""
