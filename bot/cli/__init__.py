"""The `bot` command line: argument reading (`bot.cli.main`), the long-running commands, the
offline demo and sandbox, and the operator's commands.

Empty on purpose: `bot.cli.main` must start fast, so nothing is imported here."""
