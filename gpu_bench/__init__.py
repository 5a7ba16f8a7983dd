"""The evaluator: compile, verify and time kernel candidates; imports nothing else of evoteam."""
