"""Coordination between processes over Redis: turn dispatch (`dispatch`), live-event fan-out
(`events`, with its wire format in `live_wire`) and a health probe (`health`).

The database stays the system of record: losing Redis loses no data, only promptness.
"""
