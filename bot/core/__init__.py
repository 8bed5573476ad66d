"""What every process of the bot shares, whatever surface it serves: settings, logs, the model,
durations, garbage-collector tuning, the clock and its cron, retention, and the ASGI serving.

Empty on purpose: each command imports only the pieces it needs."""
