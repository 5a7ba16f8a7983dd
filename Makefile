# Shortcuts for the scripts (they are the commands; make only names them).
.PHONY: test test-fast hardening setup setup-tests

setup:
	scripts/setup

setup-tests:
	scripts/setup-tests

test:
	scripts/test

test-fast:
	scripts/test --fast

hardening:
	scripts/hardening
