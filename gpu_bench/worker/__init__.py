"""The worker process that runs candidate code, and the client that owns it (JSON lines on stdio)."""
