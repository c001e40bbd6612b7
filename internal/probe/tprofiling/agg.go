package tprofiling

import (
	"net/netip"
	"sort"
	"strconv"

	"github.com/galago-project/galago/internal/syscap"
)

// Event is one tprofiling event of a thread: one or more kernel events of
// the same name aggregated (Count), as gala-gopher reports them.
type Event struct {
	PID, TGID uint32
	Comm      string // the thread's name
	Name      string // event.name: the syscall, or oncpu / offcpu
	Type      string // event.type: oncpu, offcpu, file, net, sched, lock
	// Start is the first event's start, Dur the sum of the events'
	// durations (CLOCK_MONOTONIC ns): end_time is Start+Dur, as
	// gala-gopher defines it.
	Start, Dur uint64
	Count      int
	// The first event's extended attributes.
	FD            int64 // -1: none
	Ino           uint64
	Local, Remote netip.AddrPort
	FutexOp       string
	// CPU is an oncpu_sample event's CPU (cpu).
	CPU uint32
	// Bytes is mem_glibc's mem.size: the bytes allocated less those freed
	// (summed over an aggregate).
	Bytes int64
	// LockAddr is a pthread_sync event's lock (lock.addr); GCGen and
	// GCCollected a python_gc event's generation and objects collected
	// (gc.generation, gc.collected; the first collection's of an
	// aggregate).
	LockAddr    uint64
	GCGen       int64
	GCCollected int64
	// FilePath is file.path: the fd's file, read from /proc when the
	// event is reported ("" for sockets and when the fd is gone).
	FilePath string
	// StackID is the kernel's id of the thread's user stack (negative:
	// none); Stack is func.stack, named from it when the event is
	// reported: frames root to leaf, each followed by ";".
	StackID int32
	Stack   string
	// kind is the type and call the name is made of (the aggregation key).
	kind uint16
	// Open says the call had not returned when this was reported (a
	// thread blocked in it); Dur runs to the report time.
	Open bool
}

// End is Start+Dur.
func (e *Event) End() uint64 { return e.Start + e.Dur }

// SockConn is sock.conn: "<local> -> <remote>" of a socket, "" otherwise.
func (e *Event) SockConn() string {
	if !e.Local.IsValid() {
		return ""
	}
	if !e.Remote.IsValid() || e.Remote.Port() == 0 {
		return "tcp " + e.Local.String()
	}
	return "tcp " + e.Local.String() + " -> " + e.Remote.String()
}

// futexOps names futex's operations (op & FUTEX_CMD_MASK), as futex.op.
var futexOps = map[uint64]string{0: "wait", 1: "wake", 2: "fd", 3: "requeue", 4: "cmp_requeue", 5: "wake_op",
	6: "lock_pi", 7: "unlock_pi", 8: "trylock_pi", 9: "wait_bitset", 10: "wake_bitset", 11: "wait_requeue_pi",
	12: "cmp_requeue_pi", 13: "lock_pi2"}

// futexOp names futex's op argument.
func futexOp(arg uint64) string {
	const cmdMask = 0x7f // FUTEX_CMD_MASK: the op without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256)
	if n, ok := futexOps[arg&cmdMask]; ok {
		return n
	}
	return "op" + strconv.FormatUint(arg&cmdMask, 10)
}

// fromKernel makes an Event of one kernel event.
func fromKernel(k syscap.TprofEvent) Event {
	e := Event{PID: k.PID, TGID: k.TGID, Comm: k.Comm, Type: k.Type.String(), Start: k.Start, Dur: k.Dur, Count: 1, FD: -1,
		StackID: k.UserStack, kind: uint16(k.Type)<<8 | uint16(k.Call)}
	switch k.Type {
	case syscap.TprofOncpu, syscap.TprofOffcpu:
		e.Name = e.Type
	case syscap.TprofPthread:
		e.Name, e.LockAddr = syscap.PthreadFunc(k.Call), k.Arg
		return e
	case syscap.TprofPyGC:
		e.Name, e.GCGen, e.GCCollected = e.Type, int64(k.Arg), k.Ret
		return e
	case syscap.TprofSample:
		e.Name, e.CPU = e.Type, uint32(k.Arg)
		return e
	case syscap.TprofMemGlibc:
		e.Name = syscap.MemFunc(k.Call)
		return e
	default:
		e.Name = k.Call.String()
	}
	switch {
	case k.Call == syscap.CallFutex:
		e.FutexOp = futexOp(k.Arg)
	case k.Call.HasFD():
		e.FD, e.Ino, e.Local, e.Remote = int64(k.Arg), k.Ino, k.Local, k.Remote
	}
	return e
}

// fromOpen makes an open Event of a call still in progress at now.
func fromOpen(o syscap.TprofOpen, comm string, now uint64) Event {
	k := syscap.TprofEvent{PID: o.PID, TGID: o.TGID, Comm: comm, Type: o.Type, Call: o.Call, Arg: o.Arg, Start: o.Start, UserStack: o.UserStack}
	if now > o.Start {
		k.Dur = now - o.Start
	}
	e := fromKernel(k)
	e.Open = true
	return e
}

// aggKey is a thread and event name: the name is its type and call.
type aggKey struct {
	pid  uint32
	kind uint16
}

// aggregator merges the short events of a thread as gala-gopher does:
// events of the same name and thread shorter than the window
// (min_aggr_dur), starting within the window of the first, become one
// event (count, summed duration, the first one's attributes). An event as
// long as the window or longer is never merged: it is what a timeline is
// read for. At most maxPending aggregates are open and at most maxOut
// events leave per period; what those bounds refuse is counted in
// dropped.
type aggregator struct {
	window     uint64
	maxPending int
	maxOut     int

	pending map[aggKey]*Event
	out     []Event
	dropped uint64
}

func newAggregator(window uint64, maxPending, maxOut int) *aggregator {
	return &aggregator{window: window, maxPending: maxPending, maxOut: maxOut, pending: map[aggKey]*Event{}}
}

// add takes one kernel event.
func (a *aggregator) add(e Event) {
	if e.Type == "oncpu_sample" {
		// A sample is a point of the timeline, not merged (as
		// gala-gopher's).
		a.emit(e)
		return
	}
	k := aggKey{e.PID, e.kind}
	p := a.pending[k]
	if p != nil && e.Dur < a.window && e.Start >= p.Start && e.Start < p.Start+a.window {
		p.Count += e.Count
		p.Dur += e.Dur
		p.Bytes += e.Bytes
		return
	}
	if p != nil && e.Dur < a.window && e.Start < p.Start {
		// Out of order (another CPU's ring slot): within the window it
		// still belongs to p, which keeps its first event's start.
		if p.Start-e.Start < a.window {
			p.Count += e.Count
			p.Dur += e.Dur
			p.Bytes += e.Bytes
			return
		}
	}
	if e.Dur >= a.window {
		a.emit(e)
		return
	}
	if p != nil {
		a.emit(*p)
		delete(a.pending, k)
	}
	if len(a.pending) >= a.maxPending {
		a.dropped++
		return
	}
	ne := e
	a.pending[k] = &ne
}

// stackIDs are the stack ids the open aggregates name.
func (a *aggregator) stackIDs() map[int32]bool {
	ids := make(map[int32]bool, len(a.pending))
	for _, p := range a.pending {
		if p.StackID >= 0 {
			ids[p.StackID] = true
		}
	}
	return ids
}

func (a *aggregator) emit(e Event) {
	if len(a.out) >= a.maxOut {
		a.dropped++
		return
	}
	a.out = append(a.out, e)
}

// flush emits the aggregates whose window ended before now (all of them
// with all), in start order.
func (a *aggregator) flush(now uint64, all bool) {
	var done []Event
	for k, p := range a.pending {
		if all || now >= p.Start+a.window {
			done = append(done, *p)
			delete(a.pending, k)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Start < done[j].Start })
	for _, e := range done {
		a.emit(e)
	}
}

// take returns the events out and starts a new period; dropped is what
// the bounds refused since the last take.
func (a *aggregator) take() (out []Event, dropped uint64) {
	out, dropped = a.out, a.dropped
	a.out, a.dropped = nil, 0
	return out, dropped
}
