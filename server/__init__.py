"""The language server that shows runs in the editor (built in a later issue); imports the supervisor."""
