# Shortcuts for the scripts (they are the commands; make only names them).
.PHONY: test hardening setup

setup:
	scripts/setup

test:
	scripts/test

hardening:
	scripts/hardening
