# shellcheck shell=bash
# Sourced by every script here that compiles Go (hack/build/build-*.sh): the Go command's settings for our builds.
# - GOTOOLCHAIN=local unless set: the machine's Go builds everything (README: a newer Go is asked for explicitly).
# - CGO_ENABLED=0: static binaries, no C toolchain needed; GOFLAGS=-buildvcs=false: sources outside a checkout.
# - GOGC=400 unless set: the compiler and linker collect garbage a quarter as often. A cold build then takes about a
#   fifth less CPU and wall time, for up to about twice the memory per compiler process (JobSet v0.12.0 on 2 cores,
#   empty build cache: 256 -> 209 CPU-s, 133 -> 109 s; docs/local-cluster.md, "Building the binaries").
#   It applies to the Go command and what it runs only: the binaries built are the same.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOGC="${GOGC:-400}"
