.PHONY: test up bench
test:   ## install the test needs and run every test
	bash scripts/test.sh
up:     ## install and run the local control plane + daemon
	bash scripts/up.sh
bench:  ## the side-by-side benchmarks (not part of the tests)
	bash scripts/test.sh --co -q >/dev/null && .venv/bin/python -m bench
