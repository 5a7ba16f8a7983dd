"""The offline backend: an agent with no language model that tunes a kernel's knobs (``agent``), the knob finder
and rewriter (``knobs``, ``domains``) and the budgeted search (``search``)."""
