package bpfrt

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// CPUClock is a software cpu-clock sampling event on every online CPU
// (hardware counters are not needed, nor there in a VM), each running a
// perf_event program through a BPF link: flamegraph's oncpu and
// tprofiling's oncpu_sample.
type CPUClock struct {
	// PeriodNs is the sample period.
	PeriodNs uint64
	events   []cpuClockEvent
}

type cpuClockEvent struct {
	fd   int
	link link.Link
}

// OpenCPUClock opens the events with sample period periodNs and attaches
// prog to each.
func OpenCPUClock(prog *ebpf.Program, periodNs uint64) (*CPUClock, error) {
	if periodNs == 0 {
		return nil, errors.New("bpfrt: cpu-clock sample period 0")
	}
	cpus, err := OnlineCPUs()
	if err != nil {
		return nil, fmt.Errorf("bpfrt: %w", err)
	}
	c := &CPUClock{PeriodNs: periodNs}
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_SOFTWARE,
			Config: unix.PERF_COUNT_SW_CPU_CLOCK,
			Sample: periodNs, // sample_period: ns for cpu-clock
		}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("bpfrt: perf_event_open cpu-clock on CPU %d: %w", cpu, err)
		}
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
		if err != nil {
			unix.Close(fd)
			c.Close()
			return nil, fmt.Errorf("bpfrt: attach perf_event program on CPU %d: %w", cpu, err)
		}
		c.events = append(c.events, cpuClockEvent{fd, l})
	}
	return c, nil
}

// CPUs is the number of CPUs sampled (0 for a nil or closed clock).
func (c *CPUClock) CPUs() int {
	if c == nil {
		return 0
	}
	return len(c.events)
}

// Close detaches and closes every event. Nil-safe and idempotent.
func (c *CPUClock) Close() {
	if c == nil {
		return
	}
	for _, e := range c.events {
		_ = e.link.Close()
		_ = unix.Close(e.fd)
	}
	c.events = nil
}

// OnlineCPUs parses /sys/devices/system/cpu/online ("0-3,6").
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return ParseCPUList(strings.TrimSpace(string(b)))
}

// ParseCPUList parses a kernel CPU list ("0-2,5,7-8").
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("cpu list %q: bad range", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cpu list %q: empty", s)
	}
	return out, nil
}
