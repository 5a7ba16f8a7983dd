"""The language server (pygls): shows runs, diagnostics, speedups and role notes in the editor; imports the
supervisor, never the other way round."""
