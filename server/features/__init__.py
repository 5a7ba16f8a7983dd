"""One module per language-server feature; each exposes ``FEATURE`` (a ``server.app.Feature``)."""
