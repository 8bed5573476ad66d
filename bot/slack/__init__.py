"""Everything that speaks Slack: inbound checks and listeners, what each click or command does
(approvals, the Deny modal, Stop, resets, feedback, the Home tab, the agent's entry points), Web
API calls, clients and scopes, OAuth, Socket Mode, and rendering turns back into threads.

Empty on purpose: importing `bot.slack` imports no Slack SDK, so `bot.slack.stop_reasons` stays
cheap for the command line."""
