# shellcheck shell=bash
# Sourced by every script here that compiles Go (hack/build/build-*.sh): the Go command's settings for our builds.
# - GOTOOLCHAIN=local unless set: the Go on PATH builds everything (no toolchain download unless asked for).
# - CGO_ENABLED=0: static binaries, no C toolchain needed; GOFLAGS=-buildvcs=false: sources outside a checkout.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 GOFLAGS=-buildvcs=false
