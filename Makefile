# Everything a newcomer needs: `make demo` runs the operator end to end on a local control plane,
# `make test` runs the whole test suite. Both install what they need themselves (virtualenv, Python
# packages, control-plane binaries built from Go modules), cached between runs.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CLUSTER_DIR := .cluster

.DEFAULT_GOAL := help
.PHONY: help venv testbin node-images e2e e2e-up e2e-down lint unit integration test faults demo cluster-up cluster-down crd bench-webhook bench-admission bench-reconciler bench-recovery bench-peer bench-gating clean

help:
	@echo "Start here:"
	@echo "  make demo          set everything up and run the examples with real MPI on a local real node (kwok where it cannot run)"
	@echo "  make test          lint (ruff, mypy --strict, import contracts) and every tier: unit, webhook, fuzz, faults, integration, e2e"
	@echo "  make test T=tests/unit/test_x.py::test_y   one test file or test (any pytest arguments), building nothing it does not need"
	@echo "Tiers and checks:"
	@echo "  make lint          ruff, mypy --strict and the import contracts"
	@echo "  make unit          the unit, webhook and fuzz tiers (no control plane; installs promtool as root)"
	@echo "  make integration   the integration tier (a real control plane with kwok nodes; builds Kueue, Helm, ... first)"
	@echo "  make e2e           the real-node tier alone (Linux, root)"
	@echo "  make faults        the full fault suite (tests marked faults), printing its figures (docs/reliability.md)"
	@echo "Local clusters:"
	@echo "  make cluster-up    start the local control plane in the background (kubeconfig: $(CLUSTER_DIR)/kubeconfig)"
	@echo "  make cluster-down  stop it"
	@echo "  make e2e-up        a local control plane plus a real node (kubelet, containerd) running our images and operator"
	@echo "  make e2e-down      stop it"
	@echo "Builds (cached under ~/.cache/mpijob-operator; make test runs the ones it needs):"
	@echo "  make venv          the virtualenv .venv from the lock, requirements/dev.txt"
	@echo "  make testbin       kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok from Go modules"
	@echo "  make builds        everything make test builds, the Go and the Debian builds side by side"
	@echo "  make build-chain-go      its Go builds alone, one after the other"
	@echo "  make build-chain-debian  its Debian builds alone, one after the other"
	@echo "  make node-images   the real node (kubelet, containerd, CoreDNS) and the images it runs (Linux, root)"
	@echo "  make node-bin      its Go half: kubelet and CoreDNS"
	@echo "  make debian-images its Debian half: containerd, the images (mmdebstrap, buildah) and the local registry"
	@echo "  make peer-bin      the upstream Go mpi-operator v0.8.2 (handover test, bench-peer)"
	@echo "  make kueue         Kueue, for tests/integration/test_kueue.py"
	@echo "  make jobset        the JobSet controller v0.12.0, for tests/e2e/test_jobset.py"
	@echo "  make cert-manager  cert-manager v1.11.5 (controller, cainjector, webhook), for tests/e2e/test_cert_manager.py"
	@echo "  make cosign        cosign v2.6.5, for make release COSIGN_KEY=... and tests/e2e/test_release.py"
	@echo "  make scheduler-plugins  the coscheduling scheduler, for the gang-scheduling tests"
	@echo "  make helm          Helm, for the chart tests and helm install from a checkout"
	@echo "  make promtool      promtool (Debian's prometheus package), for the alert-rule tests"
	@echo "  make images REGISTRY=host[:port]/path [TAG=...] [INSECURE=1]  build the operator's images, push them, print how to deploy them"
	@echo "  make release VERSION=x.y.z REGISTRY=host[:port][/path] [PLATFORMS=linux/amd64,linux/arm64] [INSECURE=1] [COSIGN_KEY=...]  cut a release: both images (amd64 and arm64, the other one emulated), their SBOMs and the chart (OCI) pushed and signed, digests printed (RELEASE.md)"
	@echo "Generated files (after an API change, in this order; CONTRIBUTING.md):"
	@echo "  make crd           regenerate deploy/crds/ and deploy/components/api-v2/ (and the Helm chart's copies)"
	@echo "  make chart         copy the CRD, its v2 patch, the fixed RBAC and the alert rules of deploy/ into deploy/chart/mpi-operator,"
	@echo "                     and deploy/monitoring's rules, dashboard and metrics Service into deploy/monitoring/prometheus-operator"
	@echo "  make api-reference regenerate docs/api-reference.md from the API models"
	@echo "  make lock          regenerate the pinned dependencies, requirements/*.txt, after a change in pyproject.toml"
	@echo "Benchmarks (figures in docs/benchmarks.md):"
	@echo "  make bench-webhook     webhook server benchmark (B2)"
	@echo "  make bench-admission   through the API server (B0/B1)"
	@echo "  make bench-reconciler  pod-create ceiling, time to all workers created, API writes per job (B0/B3/B5)"
	@echo "  make bench-recovery    recovery after a reconciler restart"
	@echo "  make bench-peer        side by side with the upstream Go mpi-operator v0.8.2: B3-B6, then scale (BENCH_PEER_PARTS=peer,scale; BENCH_PEER_ARGS=..., BENCH_SCALE_ARGS=...)"
	@echo "  make bench-gating      launcher gating's added time per job on the real node, p50/p99 (Linux, root; BENCH_GATING_ARGS=...)"
	@echo "  make clean         remove .venv, .cluster and the tools' caches in the checkout"
	@echo "  make help          this list"

# Every install takes its packages from the lock, requirements/<extra>.txt: exact versions with their hashes,
# compiled from pyproject.toml by `make lock` (dev.txt for this virtualenv; webhook.txt and reconciler.txt for
# the images; bench.txt for the benchmarks). The project itself is installed on top without dependencies.
LOCK := requirements
$(STAMP): pyproject.toml $(LOCK)/dev.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required (set PYTHON=...)")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)/dev.txt
	@# PYTHONWARNINGS: setuptools boxes a notice about editable flat layouts into every install's output
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	@touch $@

venv: $(STAMP)

# Regenerate the lock from pyproject.toml after changing a dependency there; versions already locked are kept
# unless LOCK_ARGS=--upgrade (or --upgrade-package NAME). dev.txt is resolved first and the others within it,
# so every install runs the same version of a package. Universal: markers for other platforms are kept.
UV_COMPILE = $(VENV)/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
	--quiet --custom-compile-command 'make lock' $(LOCK_ARGS)
.PHONY: lock
lock: $(STAMP)
	$(UV_COMPILE) --extra dev -o $(LOCK)/dev.txt
	$(UV_COMPILE) --extra dev --extra bench -c $(LOCK)/dev.txt -o $(LOCK)/bench.txt
	$(UV_COMPILE) --extra webhook -c $(LOCK)/dev.txt -o $(LOCK)/webhook.txt
	$(UV_COMPILE) --extra reconciler -c $(LOCK)/dev.txt -o $(LOCK)/reconciler.txt

testbin:
	@bash hack/build/build-testbin.sh >/dev/null

# The real node's binaries (kubelet, CoreDNS; containerd & co. from Debian) and the images it runs
# (pause, mpi-pi:{openmpi,openmpi4,mpich,intel}, Prometheus from Debian trixie's package for
# tests/e2e/test_monitoring.py, our webhook and reconciler from their Dockerfiles via buildah), cached under
# ~/.cache/mpijob-operator; a no-op when cached. Each image's build prints its time ("prometheus ready (20 s)",
# 0 s when cached). Needs Linux and root: skipped otherwise.
# node-bin is the Go half (kubelet, CoreDNS: compiling), debian-images the other (Debian packages and image builds:
# downloads and disk), which `make test` runs side by side (builds, below).
REAL_NODE_OK = [ "$$(uname -s)" = Linux ] && [ "$$(id -u)" = 0 ]
node-images: node-bin debian-images

.PHONY: node-bin debian-images
node-bin: testbin
	@if $(REAL_NODE_OK); then bash hack/build/build-node.sh >/dev/null; \
	else echo "node-bin: not Linux/root, the real-node tests (tests/e2e) will be skipped"; fi

debian-images:
	@if $(REAL_NODE_OK); then \
	  bash hack/build/build-images.sh >/dev/null && bash hack/build/build-operator-images.sh >/dev/null && \
	  bash hack/build/install-registry.sh >/dev/null && bash hack/build/build-images.sh pytorch >/dev/null; \
	else echo "debian-images: not Linux/root, the real-node tests (tests/e2e) will be skipped"; fi

# The operator's images pushed to your registry: `make images REGISTRY=registry.example.com/mpi [TAG=v0.1.0]
# [INSECURE=1]` builds them (buildah, no Docker engine) and pushes $(REGISTRY)/mpijob-webhook:$(TAG) and
# $(REGISTRY)/mpijob-reconciler:$(TAG) with skopeo (`skopeo login` first), then prints the references and the
# kustomize and Helm settings that deploy them (docs/operator-guide.md#images-from-your-registry). TAG defaults to
# `git describe --tags --always --dirty`; INSECURE=1 allows plain HTTP or an untrusted certificate (a test registry).
.PHONY: images
images:
	@REGISTRY="$(REGISTRY)" TAG="$(TAG)" INSECURE="$(INSECURE)" bash hack/build/push-operator-images.sh

# A release (RELEASE.md): `make release VERSION=x.y.z REGISTRY=host[:port][/path] [INSECURE=1]` refuses unless
# VERSION is pyproject.toml's version, CHANGELOG.md has its section and the checkout is clean (UNCHECKED=1 skips
# those checks: test releases only); then pushes both images tagged x.y.z and the chart to oci://REGISTRY/charts
# (hack/build/release.sh) with an SBOM beside each image, signs them all with COSIGN_KEY=<cosign.key> when given
# (the key's password in the environment, COSIGN_PASSWORD) and prints their digests. Each image tag is an index of
# one image per platform: PLATFORMS=linux/amd64,linux/arm64 by default where this machine can emulate the other.
.PHONY: release
release:
	@VERSION="$(VERSION)" REGISTRY="$(REGISTRY)" PLATFORMS="$(PLATFORMS)" INSECURE="$(INSECURE)" \
	  UNCHECKED="$(UNCHECKED)" COSIGN_KEY="$(COSIGN_KEY)" bash hack/build/release.sh

e2e: $(STAMP) node-images jobset cert-manager cosign
	$(VENV)/bin/pytest tests/e2e

e2e-up: $(STAMP) node-images
	$(PY) -m hack.devcluster.realnode up --dir $(CLUSTER_DIR)

e2e-down: $(STAMP)
	$(PY) -m hack.devcluster.realnode down --dir $(CLUSTER_DIR)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

unit: $(STAMP) promtool
	$(VENV)/bin/pytest tests/unit tests/webhook tests/fuzz

# The upstream Go operator v0.8.2 (hack/build/build-peer.sh, cached beside the testbin) for the handover test
# tests/integration/test_handover.py, which is skipped without Go.
peer-bin:
	@if command -v go >/dev/null; then bash hack/build/build-peer.sh >/dev/null; else echo "peer-bin: no Go, the handover test will be skipped"; fi

# Kueue (sigs.k8s.io/kueue) for tests/integration/test_kueue.py, built from the Go module proxy and cached
# beside the control-plane binaries (docs/kueue.md); without Go those tests are skipped.
.PHONY: kueue
kueue:
	@if command -v go >/dev/null; then bash hack/build/build-kueue.sh >/dev/null; else echo "kueue: no Go, the Kueue tests will be skipped"; fi

# JobSet (sigs.k8s.io/jobset v0.12.0) for tests/e2e/test_jobset.py (`render --as jobset` run by a real JobSet
# controller) and tests/integration/test_render_exports.py (its and Trainer's CRDs), built from the Go module proxy
# and cached beside the control-plane binaries; without Go those tests are skipped.
.PHONY: jobset
jobset:
	@if command -v go >/dev/null; then bash hack/build/build-jobset.sh >/dev/null; else echo "jobset: no Go, the JobSet tests will be skipped"; fi

# cert-manager (github.com/cert-manager/cert-manager v1.11.5: its controller, cainjector and webhook, in one go build)
# for tests/e2e/test_cert_manager.py (the operator's default certificates issued, injected and renewed by a real
# cert-manager), built from the Go module proxy and cached beside the control-plane binaries; without Go that test
# is skipped. hack/build/build-cert-manager.sh says why this version.
.PHONY: cert-manager
cert-manager:
	@if command -v go >/dev/null; then bash hack/build/build-cert-manager.sh >/dev/null; else echo "cert-manager: no Go, the cert-manager test will be skipped"; fi

# cosign (github.com/sigstore/cosign/v2 v2.6.5) for `make release COSIGN_KEY=...` and tests/e2e/test_release.py (the
# releases' signatures verified), built from the Go module proxy and cached beside the control-plane binaries: in the
# Go build chain, so that the e2e tier does not build it; without Go the releases are not signed.
.PHONY: cosign
cosign:
	@if command -v go >/dev/null; then bash hack/build/build-cosign.sh >/dev/null; else echo "cosign: no Go, the test releases will not be signed"; fi

# scheduler-plugins (sigs.k8s.io/scheduler-plugins: the Coscheduling scheduler, its PodGroup controller and
# CRDs) for tests/integration/test_gang_scheduling.py, built from the Go module proxy and cached beside the
# control-plane binaries (docs/operator-guide.md, gang scheduling); without Go those tests are skipped.
.PHONY: scheduler-plugins
scheduler-plugins:
	@if command -v go >/dev/null; then bash hack/build/build-scheduler-plugins.sh >/dev/null; else echo "scheduler-plugins: no Go, the coscheduling tests will be skipped"; fi

# Helm (helm.sh/helm/v4) for tests/unit/test_chart.py, tests/integration/test_helm_chart.py and `helm install`
# from a checkout, built from the Go module proxy and cached beside the control-plane binaries; without Go
# the chart tests are skipped.
.PHONY: helm
helm:
	@if command -v go >/dev/null; then bash hack/build/build-helm.sh >/dev/null; else echo "helm: no Go, the chart tests will be skipped"; fi

# promtool (Debian's prometheus package) for tests/unit/test_monitoring.py: `promtool check rules` and
# `promtool test rules` on deploy/monitoring/prometheus-rules.yaml. Installed with apt-get when missing and we
# are root, as hack/build installs mmdebstrap and buildah; otherwise those tests are skipped.
.PHONY: promtool
promtool:
	@command -v promtool >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then bash hack/build/apt-install.sh prometheus 2>/dev/null; \
	  else echo "promtool: not root or no apt-get, the alert-rule tests will be skipped"; fi; }

integration: $(STAMP) testbin peer-bin kueue scheduler-plugins helm jobset
	$(VENV)/bin/pytest tests/integration

# `make test T=<pytest arguments>` runs just those, with the virtualenv and nothing else built first: a test that
# needs the control plane builds its binaries on first use; Kueue, Helm, scheduler-plugins, the Go operator and the
# real node are built by their own targets (make kueue, ...), and their tests say so when they skip.
ifdef T
test: $(STAMP)
	$(VENV)/bin/pytest $(T)
else
test: $(STAMP) builds lint
	$(VENV)/bin/pytest $(SIDE_BY_SIDE)
endif

# The full run's tiers side by side in TEST_WORKERS processes (pytest-xdist): the real node's tests in one, the other
# tiers module by module (tests/tier_scheduling.py makes the scopes and starts the longest tiers first). TEST_WORKERS=0 runs it all in
# one process, one test after the other.
TEST_WORKERS ?= 3
SIDE_BY_SIDE = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

# Everything `make test` builds, in two chains side by side, each one step after the other: the Go builds
# (compiling: CPU) and the Debian ones (package downloads, image builds: network and disk). apt-get calls take one
# lock (hack/build/apt-install.sh). Each chain prints its time; a no-op when everything is cached.
.PHONY: builds build-chain-go build-chain-debian
builds:
	@$(MAKE) --no-print-directory -j2 build-chain-go build-chain-debian

build-chain-go:
	@began=$$(date +%s); for target in testbin peer-bin kueue scheduler-plugins helm jobset cert-manager cosign node-bin; do \
	  $(MAKE) --no-print-directory $$target || exit 1; done; \
	echo "builds: the Go chain took $$(( $$(date +%s) - began )) s"

build-chain-debian:
	@began=$$(date +%s); for target in promtool debian-images; do \
	  $(MAKE) --no-print-directory $$target || exit 1; done; \
	echo "builds: the Debian chain took $$(( $$(date +%s) - began )) s"

# The full fault suite: every test marked `faults` (a plain `pytest` leaves them out; `make test` runs
# the short versions). FAULT_SEED=<n> repeats a run's random choices.
faults: $(STAMP) testbin
	$(VENV)/bin/pytest -m faults

cluster-up: $(STAMP) testbin
	$(PY) -m hack.devcluster up --dir $(CLUSTER_DIR)

cluster-down: $(STAMP)
	$(PY) -m hack.devcluster down --dir $(CLUSTER_DIR)

# As root on Linux, node-images installs and builds what the real node needs (as for make e2e-up), so the demo
# computes pi with real MPI; elsewhere the demo says why it runs kwok alone.
demo: $(STAMP) testbin node-images
	$(PY) -m hack.demo

crd: $(STAMP)
	$(PY) hack/gen/crd.py
	$(PY) hack/gen/chart.py

# The Helm chart's copies of deploy/'s fixed objects (the CRD in its crds/, the ClusterRoles), with kustomize's
# labels; tests/unit/test_chart.py fails when they, or any object the chart renders, differ from the base. Also the
# files the kustomize component deploy/monitoring/prometheus-operator makes of deploy/monitoring.
.PHONY: chart
chart: $(STAMP)
	$(PY) hack/gen/chart.py

.PHONY: api-reference
api-reference: $(STAMP)  ## regenerate docs/api-reference.md from the API models
	$(PY) hack/gen/api_reference.py

# wrk comes from the distribution: the benchmark installs it with apt-get when it is missing and we are root.
bench-webhook: $(STAMP)
	$(PY) -m hack.bench.webhook $(BENCH_WEBHOOK_ARGS)

bench-admission: $(STAMP) testbin
	$(PY) -m hack.bench.admission

bench-reconciler: $(STAMP) testbin
	$(PY) -m hack.bench.reconciler

bench-recovery: $(STAMP) testbin
	$(PY) -m hack.bench.recovery

# Launcher gating on the real node (WaitForWorkersReady pi jobs; waits for the node while another run holds it).
bench-gating: $(STAMP) node-images
	$(PY) -m hack.bench.gating $(BENCH_GATING_ARGS)

# The peer benchmark: builds github.com/kubeflow/mpi-operator from the Go module proxy (cached beside the
# control-plane binaries; benchmark only) and plots with matplotlib (the `bench` extra).
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP) $(LOCK)/bench.txt
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)/bench.txt
	@touch $@

# Side by side with the Go operator: B0-B6 (hack.bench.peer), then the scale scenarios (hack.bench.scale: W = 1,000
# and 10,000, 1,000 jobs at once, a job too large for its ConfigMap, the API server's floor). BENCH_PEER_PARTS picks.
BENCH_PEER_PARTS ?= peer,scale
bench-peer: $(BENCH_STAMP) testbin
	@bash hack/build/build-peer.sh >/dev/null
	@case ",$(BENCH_PEER_PARTS)," in *,peer,*) $(PY) -m hack.bench.peer $(BENCH_PEER_ARGS);; esac
	@case ",$(BENCH_PEER_PARTS)," in *,scale,*) $(PY) -m hack.bench.scale $(BENCH_SCALE_ARGS);; esac

clean:
	rm -rf $(VENV) $(CLUSTER_DIR) .mypy_cache .ruff_cache .pytest_cache
