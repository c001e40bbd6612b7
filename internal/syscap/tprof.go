package syscap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
)

// TprofType is the type of a thread event (enum syscap_tprof_type).
type TprofType uint8

// The types, as tprofiling's event.type names them (String).
const (
	TprofOncpu  = TprofType(syscapSyscapTprofTypeSYSCAP_TP_ONCPU)
	TprofOffcpu = TprofType(syscapSyscapTprofTypeSYSCAP_TP_OFFCPU)
	TprofFile   = TprofType(syscapSyscapTprofTypeSYSCAP_TP_FILE)
	TprofNet    = TprofType(syscapSyscapTprofTypeSYSCAP_TP_NET)
	TprofSched  = TprofType(syscapSyscapTprofTypeSYSCAP_TP_SCHED)
	TprofLock   = TprofType(syscapSyscapTprofTypeSYSCAP_TP_LOCK)
	numTprof    = int(syscapSyscapTprofTypeSYSCAP_TP_MAX)
)

var tprofTypeNames = [...]string{"oncpu", "offcpu", "file", "net", "sched", "lock"}

func (t TprofType) String() string {
	if int(t) < len(tprofTypeNames) {
		return tprofTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// TprofCall is a traced syscall (enum syscap_tprof_call), 0 for the
// on-/off-CPU slices.
type TprofCall uint8

// CallFutex is futex, whose Arg is its op.
const CallFutex = TprofCall(syscapSyscapTprofCallSYSCAP_TPC_FUTEX)

// tprofCallNames are the syscalls' names, by enum syscap_tprof_call.
var tprofCallNames = [...]string{"", "read", "write", "readv", "writev", "preadv", "pwritev", "sync", "fsync",
	"fdatasync", "sched_yield", "nanosleep", "clock_nanosleep", "wait4", "select", "pselect6", "poll", "ppoll",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "futex"}

func (c TprofCall) String() string {
	if int(c) < len(tprofCallNames) {
		return tprofCallNames[c]
	}
	return fmt.Sprintf("call(%d)", uint8(c))
}

// HasFD says the call's Arg is a file descriptor.
func (c TprofCall) HasFD() bool {
	// As tprof_has_fd in tprof.bpf.h.
	switch x := syscapSyscapTprofCall(c); {
	case x >= syscapSyscapTprofCallSYSCAP_TPC_READ && x <= syscapSyscapTprofCallSYSCAP_TPC_PWRITEV,
		x == syscapSyscapTprofCallSYSCAP_TPC_FSYNC, x == syscapSyscapTprofCallSYSCAP_TPC_FDATASYNC,
		x >= syscapSyscapTprofCallSYSCAP_TPC_SENDTO && x <= syscapSyscapTprofCallSYSCAP_TPC_RECVMMSG:
		return true
	}
	return false
}

// TprofEvent is one event of a thread: a syscall that lasted at least the
// minimum, or an on- or off-CPU slice.
type TprofEvent struct {
	Start, Dur uint64 // CLOCK_MONOTONIC ns
	PID, TGID  uint32 // thread and process
	Comm       string // the thread's name
	Type       TprofType
	Call       TprofCall
	// Arg is the fd (calls with HasFD) or futex's op; Ret the return value.
	Arg uint64
	Ret int64
	// Ino is the inode of the fd's file; Local and Remote the connection
	// of a socket (invalid otherwise).
	Ino           uint64
	Local, Remote netip.AddrPort
	// UserStack is the thread's user stack (Stack reads it): of the call
	// at its entry, of an off-CPU slice where it went off the CPU;
	// negative when there is none (on-CPU slices, an empty stack) or it
	// was not recorded (counted lost).
	UserStack int32
}

// tprofRecSize is the size of a record in the ring.
const tprofRecSize = int(unsafe.Sizeof(syscapSyscapTprofRec{}))

// DecodeTprof decodes one ring buffer record.
func DecodeTprof(raw []byte) (TprofEvent, error) {
	if len(raw) != tprofRecSize {
		return TprofEvent{}, fmt.Errorf("syscap: tprofiling record of %d bytes, want %d", len(raw), tprofRecSize)
	}
	// The generated struct has the record's layout (little-endian, as
	// the bpfel object): a copy, not encoding/binary's reflection (a
	// tenth of the time, and this runs per event).
	r := *(*syscapSyscapTprofRec)(unsafe.Pointer(&raw[0]))
	if int(r.Type) >= numTprof || int(r.Call) >= len(tprofCallNames) {
		return TprofEvent{}, fmt.Errorf("syscap: tprofiling record of type %d call %d", r.Type, r.Call)
	}
	e := TprofEvent{Start: r.Start, Dur: r.Dur, PID: r.Pid, TGID: r.Tgid, Comm: bpfrt.CString(r.Comm[:]),
		Type: TprofType(r.Type), Call: TprofCall(r.Call), Arg: r.Arg, Ret: r.Ret, Ino: r.Ino, UserStack: r.UserStack}
	if r.Family == afInet || r.Family == afInet6 {
		e.Local = addrPort(r.Family, r.Saddr[:], r.Sport)
		e.Remote = addrPort(r.Family, r.Daddr[:], r.Dport)
	}
	return e, nil
}

// TprofOpen is a call still in progress (a thread blocked in it) at the
// time of InFlight.
type TprofOpen struct {
	PID, TGID uint32
	Start     uint64 // CLOCK_MONOTONIC ns
	Type      TprofType
	Call      TprofCall
	Arg       uint64
	UserStack int32 // as TprofEvent.UserStack
}

// tprofObjects are what tprofiling needs of the capture object.
type tprofObjects struct {
	Enter     *ebpf.Program  `ebpf:"syscap_tprof_sys_enter"`
	Exit      *ebpf.Program  `ebpf:"syscap_tprof_sys_exit"`
	Switch    *ebpf.Program  `ebpf:"syscap_tprof_switch"`
	TaskExit  *ebpf.Program  `ebpf:"syscap_tprof_task_exit"`
	Threads   *ebpf.Map      `ebpf:"tprof_threads"`
	Events    *ebpf.Map      `ebpf:"tprof_events"`
	RingLost  *ebpf.Map      `ebpf:"lost_events"`
	Lost      *ebpf.Map      `ebpf:"tprof_lost"`
	Stacks    *ebpf.Map      `ebpf:"tprof_stacks"`
	StackLost *ebpf.Map      `ebpf:"tprof_stack_lost"`
	Types     *ebpf.Variable `ebpf:"tprof_types"`
	MinNs     *ebpf.Variable `ebpf:"tprof_min_ns"`

	FilterCfg     *ebpf.Variable `ebpf:"galago_filter_cfg"`
	FilterTgids   *ebpf.Map      `ebpf:"filter_tgids"`
	FilterCgroups *ebpf.Map      `ebpf:"filter_cgroups"`
	FilterPending *ebpf.Map      `ebpf:"filter_pending"`
	FilterDecided *ebpf.Map      `ebpf:"filter_decided"`
	FilterLost    *ebpf.Map      `ebpf:"filter_pending_lost"`
	FilterFork    *ebpf.Program  `ebpf:"galago_filter_fork"`
	FilterExec    *ebpf.Program  `ebpf:"galago_filter_exec"`
}

func (o *tprofObjects) close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.Enter, o.Exit, o.Switch, o.TaskExit, o.Threads, o.Events, o.RingLost,
		o.Lost, o.Stacks, o.StackLost, o.FilterTgids, o.FilterCgroups, o.FilterPending, o.FilterDecided, o.FilterLost, o.FilterFork, o.FilterExec} {
		if c != nil && !isNilCloser(c) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// TprofOptions configure OpenTprof.
type TprofOptions struct {
	// Targets are the snoopers (nil: every process).
	Targets snoop.Targets
	// RingSize is the ring buffer's size in bytes (CheckRingSize); 0 is
	// DefaultTprofRing.
	RingSize int
	// StackEntries bounds the distinct user stacks kept (tprof_stacks);
	// 0 is DefaultTprofStacks.
	StackEntries int
	// Handle receives each event, on the reading goroutine.
	Handle func(TprofEvent)
	// OnLost receives the events lost to a full ring or thread table and
	// the new processes the snooper filter could not mark pending.
	OnLost func(uint64)
	// OnStackLost receives the user stacks not recorded (the events were
	// sent without one); nil: OnLost.
	OnStackLost func(uint64)
	// OnError receives undecodable records.
	OnError func(error)
}

// DefaultTprofRing is the tprofiling ring's default size.
const DefaultTprofRing = 4 << 20

// DefaultTprofStacks is the default number of distinct user stacks kept
// (about 540 bytes each: TprofStackDepth frames and the bucket).
const DefaultTprofStacks = 8192

// TprofStackDepth is the most frames of a stack kept (TPROF_STACK_DEPTH):
// the frames nearest the root of a deeper stack are cut.
const TprofStackDepth = 64

// Tprof is the capture object's thread events (for the tprofiling
// probe): syscalls of the chosen types that lasted a minimum, and on- and
// off-CPU slices from sched_switch, per thread of the observed processes.
// Like Stats it is a separate load of the object with its own snooper
// filter: the l7 capture and the proc statistics neither pay for it nor
// change it.
type Tprof struct {
	objs   tprofObjects
	filter *bpfrt.FilterSync
	reader *bpfrt.Reader

	mu        sync.Mutex
	links     map[string]link.Link
	lost      bpfrt.LostCounter
	stackLost bpfrt.LostCounter
}

// OpenTprof loads the tprofiling programs and applies the snoopers;
// SetTypes attaches them.
func OpenTprof(o TprofOptions) (*Tprof, error) {
	if o.Handle == nil {
		return nil, errors.New("syscap: tprofiling needs a handler")
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultTprofRing
	}
	if err := CheckRingSize(o.RingSize); err != nil {
		return nil, err
	}
	// sys_exit comes with sys_enter and sched_process_exit is older than
	// tp_btf: checking them too would only cost each open a second (a
	// probe program load and a search of the kernel's BTF per hook).
	for _, tp := range []string{"sys_enter", "sched_switch"} {
		if err := bpfrt.HaveTPBTF(tp); err != nil {
			return nil, err
		}
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("syscap: load spec: %w", err)
	}
	spec.Maps["tprof_events"].MaxEntries = uint32(o.RingSize)
	if o.StackEntries == 0 {
		o.StackEntries = DefaultTprofStacks
	}
	if o.StackEntries < 1 || o.StackEntries > 1<<20 {
		return nil, fmt.Errorf("syscap: tprofiling stack entries %d: want 1..%d", o.StackEntries, 1<<20)
	}
	spec.Maps["tprof_stacks"].MaxEntries = uint32(o.StackEntries)
	if err := bpfrt.ApplyWakeup(spec, "tprof_events", bpfrt.Wakeup{Records: 256, RecordSize: tprofRecSize, FillPercent: 25}); err != nil {
		return nil, fmt.Errorf("syscap: %w", err)
	}
	t := &Tprof{links: map[string]link.Link{}}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("syscap: load tprofiling programs: %w", err)
	}
	t.lost = bpfrt.LostCounter{Map: t.objs.Lost, OnLost: o.OnLost}
	if o.OnStackLost == nil {
		o.OnStackLost = o.OnLost
	}
	t.stackLost = bpfrt.LostCounter{Map: t.objs.StackLost, OnLost: o.OnStackLost}
	if t.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: t.objs.FilterCfg, TGIDs: t.objs.FilterTgids, Cgroups: t.objs.FilterCgroups,
		Pending: t.objs.FilterPending, Decided: t.objs.FilterDecided, Lost: t.objs.FilterLost,
		ForkProgram: t.objs.FilterFork, ExecProgram: t.objs.FilterExec,
	}, o.OnLost); err != nil {
		t.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	if err := t.filter.Sync(o.Targets); err != nil {
		t.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	handle, onErr := o.Handle, o.OnError
	if t.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring: t.objs.Events, Lost: t.objs.RingLost, OnLost: o.OnLost, OnError: onErr,
		Handle: func(raw []byte) error {
			e, err := DecodeTprof(raw)
			if err != nil {
				return err
			}
			handle(e)
			return nil
		},
	}); err != nil {
		t.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	return t, nil
}

// SetTypes enables the event types given and sets the minimum duration of
// an event (min_exec_dur). The syscall programs are attached while a
// syscall type is on, sched_switch while any type is (for the syscall
// types only to take the user stack of a call that blocks): nothing
// attached costs nothing.
func (t *Tprof) SetTypes(minNs uint64, types ...TprofType) error {
	var mask uint32
	for _, ty := range types {
		if int(ty) >= numTprof {
			return fmt.Errorf("syscap: no tprofiling event type %d", ty)
		}
		mask |= 1 << ty
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.objs.MinNs.Set(minNs); err != nil {
		return fmt.Errorf("syscap: set tprof_min_ns: %w", err)
	}
	if err := t.objs.Types.Set(mask); err != nil {
		return fmt.Errorf("syscap: set tprof_types: %w", err)
	}
	sys := mask&(1<<TprofFile|1<<TprofNet|1<<TprofSched|1<<TprofLock) != 0
	// sched_switch also takes the stack of a syscall that blocks (the
	// only one a call that never returns gets).
	sched := mask != 0
	for _, p := range []struct {
		name string
		prog *ebpf.Program
		on   bool
	}{
		{"sys_enter", t.objs.Enter, sys}, {"sys_exit", t.objs.Exit, sys},
		{"sched_switch", t.objs.Switch, sched}, {"sched_process_exit", t.objs.TaskExit, mask != 0},
	} {
		l, attached := t.links[p.name]
		switch {
		case p.on && !attached:
			l, err := link.AttachTracing(link.TracingOptions{Program: p.prog, AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				return fmt.Errorf("syscap: attach tp_btf/%s: %w", p.name, err)
			}
			t.links[p.name] = l
		case !p.on && attached:
			delete(t.links, p.name)
			if err := l.Close(); err != nil {
				return fmt.Errorf("syscap: detach tp_btf/%s: %w", p.name, err)
			}
		}
	}
	return nil
}

// SetTargets applies the snoopers (nil: every process).
func (t *Tprof) SetTargets(s snoop.Targets) error { return t.filter.Sync(s) }

// RunFilter follows the snoopers (new processes, exits) until ctx is done.
func (t *Tprof) RunFilter(ctx context.Context) error { return t.filter.Run(ctx) }

// RunReader hands the events to the handler until ctx is done.
func (t *Tprof) RunReader(ctx context.Context) error { return t.reader.Run(ctx) }

// Programs are the programs by name, for bpfrt.Stats.
func (t *Tprof) Programs() map[string]*ebpf.Program {
	progs := t.filter.Programs()
	progs["syscap_tprof_sys_enter"] = t.objs.Enter
	progs["syscap_tprof_sys_exit"] = t.objs.Exit
	progs["syscap_tprof_switch"] = t.objs.Switch
	progs["syscap_tprof_task_exit"] = t.objs.TaskExit
	return progs
}

// InFlight lists the calls of the enabled types that threads are in now
// (a blocked call has no event until it returns, and a deadlocked one
// never does), and reports the thread table's losses to OnLost and the
// stacks not recorded to OnStackLost.
func (t *Tprof) InFlight() ([]TprofOpen, error) {
	var (
		out []TprofOpen
		tid uint32
		v   syscapSyscapTprofThread
	)
	it := t.objs.Threads.Iterate()
	for it.Next(&tid, &v) {
		if v.ScStart != 0 {
			out = append(out, TprofOpen{PID: tid, TGID: v.Tgid, Start: v.ScStart, Type: TprofType(v.ScType), Call: TprofCall(v.ScCall),
				Arg: v.ScArg, UserStack: v.ScStack})
		}
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("syscap: read tprof_threads: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := errors.Join(t.lost.Poll(), t.stackLost.Poll()); err != nil {
		return out, fmt.Errorf("syscap: %w", err)
	}
	return out, nil
}

// Stack reads the user stack id (TprofEvent.UserStack) into pcs, leaf
// first, and returns the frames read. The kernel keeps each distinct
// stack under one id for the load's life, so a caller may cache what an
// id names.
func (t *Tprof) Stack(id int32, pcs *[TprofStackDepth]uint64) ([]uint64, error) {
	if id < 0 {
		return nil, fmt.Errorf("syscap: no stack (%d)", id)
	}
	if err := t.objs.Stacks.Lookup(&id, pcs); err != nil {
		return nil, fmt.Errorf("syscap: read tprof_stacks[%d]: %w", id, err)
	}
	n := 0
	for n < len(pcs) && pcs[n] != 0 {
		n++
	}
	return pcs[:n], nil
}

// Close detaches and unloads everything. Idempotent; call it after the
// Run functions have returned.
func (t *Tprof) Close() error {
	t.mu.Lock()
	var errs []error
	for name, l := range t.links {
		errs = append(errs, l.Close())
		delete(t.links, name)
	}
	t.mu.Unlock()
	if t.reader != nil {
		errs = append(errs, t.reader.Close())
		t.reader = nil
	}
	if t.filter != nil {
		errs = append(errs, t.filter.Close())
		t.filter = nil
	}
	errs = append(errs, t.objs.close())
	t.objs = tprofObjects{}
	return errors.Join(errs...)
}
