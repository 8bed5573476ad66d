"""What the Slack renderer keeps durably: each session's delivery target, cursor and lease, and
the messages it posted (`store`), in the tables `schema` defines; what a posted message's row
keeps of it (`bodies`), typed here so the bot reads it and storage never imports the bot."""
