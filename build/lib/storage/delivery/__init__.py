"""What the Slack renderer keeps durably: each session's delivery target, cursor and lease, and
the messages it posted (`store`), in the tables `schema` defines."""
