// Package bpfrttest holds a small BPF object and helpers for testing
// internal/bpfrt and the probes built on it. Only tests import it.
package bpfrttest

//go:generate go tool bpf2go -tags linux -target amd64,arm64 -type bpfrttest_event bpfrttest bpfrttest.bpf.c -- -I../../../bpf/include
