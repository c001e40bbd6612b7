// Package proctrack reports process lifecycle (fork of a new process, exec,
// exit of its last thread) from the kernel's sched_process_* tracepoints,
// and cgroup directories made and removed (cgroup_mkdir, cgroup_rmdir, in
// every hierarchy: v1, v2 and hybrid hosts), so that the snoop resolver and
// identity caches react to processes and containers as they come and go
// instead of rescanning /proc or waiting for a runtime listing.
//
// Limits: thread creation and the exit of non-last threads are not
// reported; a process that forks and exits between two reads is reported
// in order (fork, exit). Records lost to a full ring buffer are counted
// (Options.OnLost), never silent: subscribers that need completeness
// should rescan /proc when loss is reported.
package proctrack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
)

// hooks are the tracepoints, in attach order; cgroupHooks are attached
// after them when the kernel has them (without, containers are known from
// their processes only, which is logged once).
var (
	hooks       = []string{"sched_process_fork", "sched_process_exec", "sched_process_exit"}
	cgroupHooks = []string{"cgroup_mkdir", "cgroup_rmdir"}
)

// progName is the program of hook for a hook kind ("tp_btf_fork",
// "raw_tp_cgroup_mkdir").
func progName(kind, hook string) string {
	return kind + "_" + strings.TrimPrefix(hook, "sched_process_")
}

// Options configure a Tracker.
type Options struct {
	Log *slog.Logger
	// OnLost receives the number of records lost to a full ring buffer.
	OnLost func(n uint64)
	// FlushInterval bounds how long a record may wait; 0 = bpfrt default.
	FlushInterval time.Duration
	// ForceRawTracepoint uses raw_tp even where tp_btf works (tests).
	ForceRawTracepoint bool
}

// Tracker loads and attaches the proctrack programs and dispatches their
// events to subscribers.
type Tracker struct {
	opts     Options
	objs     *ebpf.Collection
	progs    map[string]*ebpf.Program
	links    []link.Link
	reader   *bpfrt.Reader
	hookKind string

	// handled is the CLOCK_MONOTONIC time (ns) as of which every event
	// has been handed to the subscribers (see HandledThrough).
	handled atomic.Uint64

	mu    sync.RWMutex
	subs  map[int]func(Event)
	next  int
	close sync.Once
}

// Open loads the BPF object and attaches it. Events are dispatched once Run
// is called; they queue in the ring buffer until then.
func Open(opts Options) (*Tracker, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	spec, err := loadProctrack()
	if err != nil {
		return nil, err
	}
	// Wake the reader every 64 records or at a quarter full, whichever
	// comes first; the reader's deadline poll picks up the rest.
	wake := bpfrt.Wakeup{Records: 64, RecordSize: TypicalRecordSize, FillPercent: 25}
	if err := bpfrt.ApplyWakeup(spec, "events", wake); err != nil {
		return nil, err
	}

	kind := "tp_btf"
	if opts.ForceRawTracepoint {
		kind = "raw_tp"
	} else {
		for _, h := range hooks {
			if err := bpfrt.HaveTPBTF(h); err != nil {
				opts.Log.Info("proctrack: using raw tracepoints", "reason", err)
				kind = "raw_tp"
				break
			}
		}
	}
	// Load only the chosen set: tp_btf programs fail to load without BTF
	// (the cgroup hooks' too, when only they are missing).
	for name := range spec.Programs {
		if !strings.HasPrefix(name, kind+"_") {
			delete(spec.Programs, name)
		}
	}
	for _, h := range cgroupHooks {
		if kind == "tp_btf" && bpfrt.HaveTPBTF(h) != nil {
			delete(spec.Programs, progName(kind, h))
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("proctrack: load: %w", err)
	}
	t := &Tracker{opts: opts, objs: coll, progs: map[string]*ebpf.Program{}, hookKind: kind, subs: map[int]func(Event){}}
	for _, h := range append(slices.Clone(hooks), cgroupHooks...) {
		l, err := t.attach(kind, h)
		if err != nil && slices.Contains(cgroupHooks, h) {
			opts.Log.Warn("proctrack: cgroup_mkdir/cgroup_rmdir unavailable: containers are known from their processes only, not as their cgroups come and go",
				"err", err)
			break
		}
		if err != nil {
			t.Close()
			return nil, err
		}
		t.links = append(t.links, l)
	}
	t.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring:          coll.Maps["events"],
		Wakeup:        wake,
		Lost:          coll.Maps[bpfrt.LostEventsMap],
		Handle:        t.handle,
		OnLost:        opts.OnLost,
		OnError:       func(err error) { opts.Log.Warn("proctrack: bad record", "err", err) },
		FlushInterval: opts.FlushInterval,
		OnDrained:     func(asOf uint64) { t.handled.Store(asOf) },
	})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("proctrack: %w", err)
	}
	return t, nil
}

// attach attaches the program of hook.
func (t *Tracker) attach(kind, hook string) (link.Link, error) {
	name := progName(kind, hook)
	prog := t.objs.Programs[name]
	var (
		l   link.Link
		err error
	)
	if kind == "tp_btf" {
		if err = bpfrt.HaveTPBTF(hook); err == nil && prog != nil {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		}
	} else {
		l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: hook, Program: prog})
	}
	if err != nil {
		return nil, fmt.Errorf("proctrack: attach %s/%s: %w", kind, hook, err)
	}
	t.progs[name] = prog
	return l, nil
}

// Cgroups says whether cgroup_mkdir and cgroup_rmdir are attached.
func (t *Tracker) Cgroups() bool { return len(t.links) > len(hooks) }

// HookKind says which hooks are attached: "tp_btf" or "raw_tp".
func (t *Tracker) HookKind() string { return t.hookKind }

// Programs are the attached programs by name, for bpfrt.Stats.
func (t *Tracker) Programs() map[string]*ebpf.Program { return t.progs }

// HandledThrough is the CLOCK_MONOTONIC time (ns) as of which every
// event that happened has been handed to the subscribers (0 before Run's
// first drain): a process's fork or exec before then has been seen,
// unless the ring was full (counted by OnLost). It moves on at every
// drain, at least every FlushInterval while Run runs.
func (t *Tracker) HandledThrough() uint64 { return t.handled.Load() }

// Subscribe adds fn, called on the reading goroutine for every event in
// kernel order; fn must not block. The returned func removes it.
func (t *Tracker) Subscribe(fn func(Event)) (unsubscribe func()) {
	t.mu.Lock()
	id := t.next
	t.next++
	t.subs[id] = fn
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.subs, id)
		t.mu.Unlock()
	}
}

func (t *Tracker) handle(raw []byte) error {
	ev, err := Decode(raw)
	if err != nil {
		return err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, fn := range t.subs {
		fn(ev)
	}
	return nil
}

// Run dispatches events until ctx is done.
func (t *Tracker) Run(ctx context.Context) error {
	if t.reader == nil {
		return errors.New("proctrack: tracker is closed")
	}
	return t.reader.Run(ctx)
}

// Close detaches and unloads everything, links first. Idempotent; call it
// after Run has returned.
func (t *Tracker) Close() error {
	var errs []error
	t.close.Do(func() {
		for i := len(t.links) - 1; i >= 0; i-- {
			errs = append(errs, t.links[i].Close())
		}
		if t.reader != nil {
			errs = append(errs, t.reader.Close())
		}
		t.objs.Close()
	})
	return errors.Join(errs...)
}
