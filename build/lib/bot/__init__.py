"""The Slack surface and the command line: turns Slack traffic into attested turns and renders
their durable events back into threads."""
