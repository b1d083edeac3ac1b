# shellcheck shell=bash
# Sourced by every script here that compiles Go (hack/build/build-*.sh): the Go command's settings for our builds.
# - GOTOOLCHAIN=local unless set: the Go on PATH builds everything (no toolchain download unless asked for).
# - CGO_ENABLED=0: static binaries, no C toolchain needed; GOFLAGS=-buildvcs=false: sources outside a checkout.
# - GOGC=400 unless set: the compiler and linker collect garbage less often, for about a fifth less CPU on these
#   builds at the cost of memory (docs/local-cluster.md, "Building the binaries"); the binaries are the same.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOGC="${GOGC:-400}"
