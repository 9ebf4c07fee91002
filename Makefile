# inabox — see README.md. Every target runs from a fresh checkout.
GO        ?= go
PKGS      ?= ./... ./testdata
STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# gotestsum runs go test and prints each package as it finishes, the
# failures, and at the end every skipped test with its reason
GOTESTSUM = $(GO) run gotest.tools/gotestsum@v1.13.0
FUZZTIME  ?= 60s

.PHONY: run bin up test unit lint bench pgo vs-ns3 fuzz soak p4-difftest tidy wireshark install-check

## run: the main job on the embedded default scenario
run:
	$(GO) run ./cmd/inabox run

## bin: the CLI and the process binaries (inabox up looks for them beside inabox)
bin:
	$(GO) build -pgo=$(CURDIR)/cmd/inabox/default.pgo -o bin/ ./cmd/inabox ./cmd/inaswitch ./cmd/inahost ./cmd/inaps

## install-check: go install …/cmd/inabox@latest from a file module proxy serving
## this checkout (as a published module would be), then run it outside the clone
install-check:
	bash scripts/install-check.sh

## up: the default real-time run over TAP in network namespaces (root)
up: bin
	bin/inabox up

## wireshark: install the INA dissector (tools/wireshark/ina.lua) where Wireshark
## and tshark load Lua plugins of the user
WIRESHARK_PLUGINS ?= $(HOME)/.local/lib/wireshark/plugins
wireshark:
	install -d "$(WIRESHARK_PLUGINS)"
	install -m 0644 tools/wireshark/ina.lua "$(WIRESHARK_PLUGINS)/ina.lua"
	@echo "installed $(WIRESHARK_PLUGINS)/ina.lua (try: tshark -r pcap/h0-w1.0-sw2.pcap -Y ina)"

## test: vet, staticcheck, and every test with the race detector in random order;
## the last lines list what was skipped and why (INABOX_NO_SKIP=1, as CI sets it,
## makes a skip for a missing tool or privilege a failure)
test: lint unit

# TestGoldenDefault (every policy's outputs on the default scenario, byte for
# byte) and the longest virtual-time tests (at full size) run without -race
# first: under -race they took 200 s of CPU, a fifth of the suite, for
# single-goroutine code; the -race run skips them, saying so
NORACE_TESTS = '^(TestTrimFaults|TestForgery|TestScalingPair|TestStragglers|TestCorruption|TestCrashRecovery|TestContentionScaling)$$'
# TestGoldenDefault runs built as inabox ships, with its profile
# (cmd/inabox/default.pgo), so the suite checks the shipped build's outputs;
# the rest are built without it (-pgo=off: one build of every package, not two)
unit:
	$(GO) test -count=1 -run '^TestGoldenDefault$$' ./cmd/inabox
	$(GO) test -pgo=off -count=1 -run $(NORACE_TESTS) ./harness/testbed ./harness/run
	$(GOTESTSUM) --format pkgname-and-test-fails --format-hide-empty-pkg -- -pgo=off -race -shuffle=on -timeout 20m $(PKGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

## bench: every benchmark with allocation counts (compare runs with benchstat),
## built as inabox ships: with its profile (PGO=off: without)
PGO ?= $(CURDIR)/cmd/inabox/default.pgo
bench:
	$(GO) test -pgo=$(PGO) -run '^$$' -bench . -benchmem -count 5 $(PKGS) | tee bench.txt

## pgo: remake cmd/inabox/default.pgo, the profile inabox is built with (about a minute)
pgo:
	bash scripts/pgo.sh

## vs-ns3: the virtual-time emulator against ns-3 on the same star, ROUNDS
## alternating runs (needs Debian's ns3 and libns3-dev; says what is missing)
ROUNDS ?= 3
vs-ns3:
	bash bench/ns3/run.sh $(ROUNDS)

## fuzz: each fuzz target for FUZZTIME (the suite runs their seed corpora only)
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## soak: the full-size runs (100 MB all-reduces under every fault, corruption over seeds, 70,000 all-reduces a job,
## the scaling pair against true scale), minutes each
soak:
	INABOX_LONG=1 $(GO) test -run '100MB|TestCorruption|TestScalingPair' -timeout 2h -v ./harness/testbed/
	INABOX_LONG=1 $(GO) test -run '^(TestContentionScaling|TestATPHashScaling|TestAllReduceIDsWrap)$$' -timeout 1h -v ./harness/run/
	INABOX_LONG=1 $(GO) test -run '^TestResultsTables$$' -timeout 1h -v ./cmd/inabox/

## p4-difftest: compile the P4 twin with p4c and run the STF vectors on BMv2
p4-difftest:
	bash switch/p4/difftest.sh
