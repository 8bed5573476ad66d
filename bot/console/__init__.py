"""The operator console: a page at `/console` over the durable records (sessions, turns,
steps, events, receipts, requests waiting for a person), whose actions are the CLI's own
engine calls, each audited. Off unless `CONSOLE_TOKENS` is set. The HTTP contract is in
`bot.console.routes`; `bot.console.wiring` builds it from settings.

Nothing is imported here: `Settings.require` reads `bot.console.tokens` at every start, and
a command that only checks its settings must not load the console's database layer with it.
"""
