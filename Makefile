# make test   installs what the tests need, checks gofmt and go vet, then runs
#             every test against a local control plane (etcd + kube-apiserver,
#             built from the Go module proxy into .cache/bin on first use).
# make demo   starts the control plane, shows it with kubectl, stops it.
# make controlplane  only builds the control plane's binaries.

GO ?= go
# Extra go test flags, e.g. make test GOTESTFLAGS="-v -run TestControlPlane"
GOTESTFLAGS ?=
# Debian packages the tests need, installed with apt-get when missing.
APT_PACKAGES ?=
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The runner is built rather than `go run`: go run turns every exit code into 1
# and would stand between the runner and the signals it passes on.
CONTROLPLANE := .cache/bin/controlplane

.PHONY: test deps fmt vet controlplane demo FORCE

# -p 1: packages share one control plane, and a test that restarts kube-apiserver
# (restartAPIServer) must not break another package's tests running meanwhile.
test: deps fmt vet $(CONTROLPLANE)
	$(CONTROLPLANE) run -- $(GO) test -p 1 -race -count=1 -timeout 20m $(GOTESTFLAGS) ./...

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Always rebuilt: go build is quick when nothing changed.
$(CONTROLPLANE): FORCE
	$(GO) build -o $@ ./hack/controlplane

controlplane: $(CONTROLPLANE)
	$(CONTROLPLANE) build

demo: $(CONTROLPLANE)
	$(CONTROLPLANE) run -- .cache/bin/kubectl get namespaces

# make bench  compares kctl with controller-runtime and client-go (bench/, its
#             own module): footprint, initial sync, queue, end to end, on a
#             local control plane; about 15-20 minutes. Not part of test.
.PHONY: bench
bench:
	bash bench/run.sh
