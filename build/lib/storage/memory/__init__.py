"""The in-memory store, for tests and examples: the same contract as `SqlStore`, no database.

It reuses the SQL store's row encoders (`storage.records`), so both keep the same shapes.
"""
