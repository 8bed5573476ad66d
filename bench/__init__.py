"""The step-cost benchmark: what one durable step costs the engine, next to the raw database floor.

Run `python -m bench` from the repository root; see `bench/README.md` for how to read it. It is a
measurement, not a test: it prints figures and whether the targets are met, and never fails a build.
"""
