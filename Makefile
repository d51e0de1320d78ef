# make test   installs what the tests need, checks gofmt and go vet, then runs
#             every test; each package's test binary starts its own local
#             control plane (etcd + kube-apiserver, see package kctltest), built
#             from the Go module proxy into the per-user cache on first use.
# make demo   starts the control plane, runs example/podcount against it, shows
#             the pod-count labels converge and follow changes, stops it all.
# make controlplane  only builds the control plane's binaries (and says where);
#             kube-controller-manager is built by the first test that asks
#             for it (kctltest.StartWithControllerManager), while the other
#             packages test.
# make test-scale  runs the shard scale and endurance tests in full (3,000
#             objects, 20 membership changes), the fuzz runs and the build of
#             the bench module; make test runs the shard tests' small
#             variants and each fuzz target's seeds (plain go test does).

GO ?= go
# Extra go test flags, e.g. make test GOTESTFLAGS="-v -run TestControlPlane"
GOTESTFLAGS ?=
# Debian packages the tests need, installed with apt-get when missing.
# prometheus: promtool checks the metrics page, and a real server scrapes it.
APT_PACKAGES ?= prometheus
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The runner (for make demo and make bench) is built rather than `go run`: go run
# turns every exit code into 1 and would stand between the runner and the
# signals it passes on.
CONTROLPLANE := .cache/bin/controlplane

.PHONY: test test-scale deps fmt vet gotest benchbuild fuzz controlplane ginkgotest tracing demo FORCE

# The control plane's binaries are built beside go vet, where their progress
# shows. kctl and its dependencies are then built once with -race, and three
# test runs go at once: kctl's packages (each package's test binary starts a
# control plane of its own on first use, so packages run in parallel too) and
# the two modules of their own. The root package spends most of its 7 minutes
# waiting on its servers, and the modules' first builds fill that time. Each
# run's output shows whole when it ends (--output-sync); kctl's ends last.
test: deps fmt
	$(MAKE) --no-print-directory -j2 vet controlplane
	$(GO) build -race ./...
	$(MAKE) --no-print-directory -j3 --output-sync=target gotest ginkgotest tracing

gotest:
	$(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) ./...

# The shard tests that make test runs small (300 ReplicaSets in 60 namespaces,
# 6 membership changes), in full: 3,000 ReplicaSets in 300 namespaces, 20
# changes (KCTL_TEST_SCALE, shard_fixture_test.go).
SCALE_TESTS = TestShardGroup_ThreeMembers_ServerSideSelector|TestShardGroup_ThreeMembers_GateOff_FilterOnly|TestShardGroup_MembershipChurn_NoOverlapNothingLost|TestShardGroup_ThreeProcesses_SIGKILLChurn
test-scale: controlplane fuzz benchbuild
	KCTL_TEST_SCALE=full $(GO) test -race -count=1 -timeout 30m -run '^($(SCALE_TESTS))$$' $(GOTESTFLAGS) .

# kctltest in a Ginkgo suite (kctltest/ginkgotest, a module of its own, so
# that Ginkgo never enters kctl's go.mod), as kctltest's doc says.
ginkgotest: controlplane
	cd kctltest/ginkgotest && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

# A reconcile middleware that makes OpenTelemetry spans (example/tracing, a
# module of its own, so that OpenTelemetry never enters kctl's go.mod).
tracing: controlplane
	cd example/tracing && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

# A coverage-guided run of each fuzz target beyond its committed seeds
# (which plain go test, and so make test, already runs): 20,000 inputs each
# in make test-scale; FUZZTIME=1000000x for a longer one. A
# count, not a duration: with a duration, Go 1.26's fuzz coordinator may fail
# a target with a bare "context deadline exceeded" at the deadline when a
# worker is mid-call (golang/go#75804, fixed in Go 1.27); seen here in CI.
FUZZTIME ?= 20000x
# A target outside the root package is written package:Target.
FUZZ_TARGETS = FuzzQueue ./webhook:FuzzAdmissionReview ./webhook:FuzzDefaultPatch ./webhook:FuzzConversionReview FuzzDecodeProtobufList FuzzSkipManagedFields FuzzDecodeJSONList FuzzDecodeProtobufWatch FuzzDecodeJSONWatch ./internal/protowire:FuzzNext ./internal/presize:FuzzPlan_DecodesAsGenerated
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		case $$t in *:*) pkg=$${t%%:*}; f=$${t##*:};; *) pkg=.; f=$$t;; esac; \
		echo "fuzzing $$f in $$pkg for $(FUZZTIME)"; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0x $$pkg 2>&1); \
		rc=$$?; \
		if [ $$rc -ne 0 ]; then echo "$$out"; exit 1; fi; \
		echo "$$out" | grep -v '^fuzz: elapsed' ; \
		case "$$out" in *"no fuzz tests to fuzz"*) \
			echo "$$pkg has no fuzz target $$f: name it package:Target in FUZZ_TARGETS"; exit 1;; \
		esac; \
	done

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Always rebuilt: go build is quick when nothing changed.
$(CONTROLPLANE): FORCE
	$(GO) build -o $@ ./hack/controlplane

controlplane: $(CONTROLPLANE)
	@bin=$$($(CONTROLPLANE) build) && echo "control plane binaries: $$bin"

demo:
	bash hack/demo.sh

# The bench/ module (controller-runtime and client-go side by side) must keep
# building, though make bench itself is too slow for every test run; make
# test-scale (and so CI) checks it: its first build compiles controller-runtime,
# minutes that a newcomer's make test need not spend.
benchbuild:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./cmd/...

# make bench  compares kctl with controller-runtime and client-go (bench/, its
#             own module): footprint, initial sync, queue, end to end, on a
#             local control plane; about 15-20 minutes. Not part of test.
.PHONY: bench
bench:
	bash bench/run.sh
