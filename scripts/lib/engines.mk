# Generated from internal/engines/engines.go by go generate ./internal/engines: do not edit.
# make check's engines, oldest first (make e2e and its parts install them), the oldest and the
# newest, and the newest.
E2E_ENGINES := debian v28 current
E2E_ENDS := debian current
E2E_NEWEST := current

.PHONY: e2e-v27
e2e-v27: ## [6 min, its engine built 5 more the first time; root; PKGS; ENGINES] the managed plugin, the differential subset and the default bridge on Docker 27.5.1 alone, as a middle engine (root; not in make check: each engine adds its build and about 2 minutes of tests to a cold CI run)
	bash scripts/engines.sh install debian v27
	E2E_MIDDLE_ENGINES="v27 v28" bash test/e2e/e2e.sh v27
	E2E_MIDDLE_ENGINES="v27 v28" bash test/e2e/e2e-diff.sh v27
	E2E_MIDDLE_ENGINES="v27 v28" bash test/e2e/e2e-bridge.sh v27
