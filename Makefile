# loom's developer commands. `make test` is what CI runs (.ci/run).
GO ?= go
FUZZTIME ?= 30s

.PHONY: test clients bench fuzz schemathesis

# vet, then every test with the race detector on, then the clients' tests,
# then schemathesis against `loom serve`'s own OpenAPI document
# (scripts/schemathesis/run: pinned, with hashes). scripts/test-deps installs
# PostgreSQL and Redis when missing (as root) and then makes a missing server
# a failure rather than a skip. scripts/webui-deps installs axe-core (npm,
# pinned) for the web UI's accessibility tests. The go tests record each
# server they start in a fresh directory per run ($LOOM_TESTSERVERS, see
# internal/testserver), and internal/testserver/leftovers then fails if one
# of them is still running or its folder is still there.
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	./scripts/webui-deps
	@rec=$$(mktemp -d "$${TMPDIR:-/tmp}/loom-testservers-XXXXXX") || exit 1; code=0; \
	echo "LOOM_TESTSERVERS=$$rec $(GO) test -race ./..."; \
	env $$(./scripts/test-deps) LOOM_TESTSERVERS="$$rec" $(GO) test -race ./... || code=$$?; \
	$(GO) run ./internal/testserver/leftovers "$$rec" || code=1; \
	rm -rf "$$rec"; exit $$code
	$(MAKE) clients
	./scripts/schemathesis/run

# The client packages' own tests (clients/python: mypy --strict and pytest;
# clients/typescript: tsc --strict and vitest), each against real `loom
# serve` processes on SQLite and PostgreSQL, LangGraph's conformance suites
# among them; their dependencies come pinned from PyPI and npm. One loom
# binary and one pgserve (a throwaway PostgreSQL) are built for both.
BIN := $(CURDIR)/.bin
clients:
	$(GO) build -o $(BIN)/loom ./cmd/loom
	$(GO) build -o $(BIN)/pgserve ./internal/testserver/pgserve
	LOOM_BIN=$(BIN)/loom LOOM_PGSERVE=$(BIN)/pgserve ./clients/python/run-tests
	LOOM_BIN=$(BIN)/loom LOOM_PGSERVE=$(BIN)/pgserve ./clients/typescript/run-tests

# schemathesis alone.
schemathesis:
	./scripts/schemathesis/run

# The benchmarks; docs/benchmarks.md records their figures.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzMessageJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./message
	$(GO) test -run '^$$' -fuzz '^FuzzDecoder$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./message
	$(GO) test -run '^$$' -fuzz '^FuzzEncoder$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./message
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./thread
	$(GO) test -run '^$$' -fuzz '^FuzzSearchTokens$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./thread
	$(GO) test -run '^$$' -fuzz '^FuzzValid$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./internal/ids
	$(GO) test -run '^$$' -fuzz '^FuzzKey$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./internal/ids
	$(GO) test -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./tokens
	$(GO) test -run '^$$' -fuzz '^FuzzCreateThread$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzPatchThread$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzAppend$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzView$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzFork$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzFromStored$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./langgraph
	$(GO) test -run '^$$' -fuzz '^FuzzRollback$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzImport$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzRun$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzDiffQuery$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzListQuery$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzItems$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzLangGraph$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzState$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./workflow
	$(GO) test -run '^$$' -fuzz '^FuzzStreams$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./openai
	$(GO) test -run '^$$' -fuzz '^FuzzResponseRequest$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./openaiapi
	$(GO) test -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./anthropic
	$(GO) test -run '^$$' -fuzz '^FuzzNormalize$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./worklog
	$(GO) test -run '^$$' -fuzz '^FuzzFold$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./worklog
	$(GO) test -run '^$$' -fuzz '^FuzzCheckBody$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./mcpserver
	$(GO) test -run '^$$' -fuzz '^FuzzFromItems$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./internal/oaiitem
