"""`python -m bot`: the `bot` command where its script is not on PATH (a virtualenv not
activated, a container running the interpreter directly). Same parser, same exit codes."""

from bot.cli.main import run

if __name__ == "__main__":
    run()
