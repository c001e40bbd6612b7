package syscap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/uprobes"
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
	// TprofPthread is a pthread_sync event: Call is the function
	// (PthreadFunc), Arg the lock's address.
	TprofPthread = TprofType(syscapSyscapTprofTypeSYSCAP_TP_PTHREAD)
	// TprofPyGC is a python_gc event: Arg is the generation, Ret the
	// objects collected.
	TprofPyGC = TprofType(syscapSyscapTprofTypeSYSCAP_TP_PYGC)
	// TprofSample is an oncpu_sample event: Arg is the CPU, Dur 0.
	TprofSample = TprofType(syscapSyscapTprofTypeSYSCAP_TP_SAMPLE)
	// TprofMemGlibc is a mem_glibc event: Call is the function
	// (MemFunc), Arg the size asked, Ret the block's address (0: the
	// allocation failed), Ino the block a realloc freed; Dur 0.
	TprofMemGlibc = TprofType(syscapSyscapTprofTypeSYSCAP_TP_MEMGLIBC)
	numTprof      = int(syscapSyscapTprofTypeSYSCAP_TP_MAX)
)

// tprofTypeNames are event.type: gala-gopher's names (its trace
// categories for pthread_sync and python_gc).
var tprofTypeNames = [...]string{"oncpu", "offcpu", "file", "net", "sched", "lock", "pthread_sync", "python_gc", "oncpu_sample", "mem_glibc"}

// pthreadFuncs are pthread_sync's functions of the C library, by the id
// the uprobes' cookies carry (TprofEvent.Call of a TprofPthread event).
var pthreadFuncs = [...]string{"pthread_mutex_lock", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
	"pthread_mutex_trylock", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "pthread_rwlock_timedrdlock",
	"pthread_rwlock_timedwrlock", "pthread_rwlock_clockrdlock", "pthread_rwlock_clockwrlock", "pthread_rwlock_tryrdlock",
	"pthread_rwlock_trywrlock", "pthread_spin_lock", "pthread_spin_trylock", "pthread_cond_wait", "pthread_cond_timedwait",
	"pthread_cond_clockwait", "pthread_barrier_wait", "pthread_join", "pthread_timedjoin_np", "pthread_tryjoin_np",
	"sem_wait", "sem_timedwait", "sem_clockwait", "sem_trywait"}

// memFuncs are mem_glibc's functions, by the id the uprobes' cookies
// carry (TPROF_MEM_* in tprof.bpf.h).
var memFuncs = [...]string{"", "malloc", "calloc", "realloc", "free"}

// MemFree is a mem_glibc event's Call for free.
const MemFree = TprofCall(4)

// MemFunc names a mem_glibc event's function (its Call).
func MemFunc(c TprofCall) string {
	if int(c) < len(memFuncs) {
		return memFuncs[c]
	}
	return fmt.Sprintf("mem(%d)", uint8(c))
}

// PthreadFunc names a pthread_sync event's function (its Call).
func PthreadFunc(c TprofCall) string {
	if int(c) < len(pthreadFuncs) {
		return pthreadFuncs[c]
	}
	return fmt.Sprintf("pthread(%d)", uint8(c))
}

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
	calls := len(tprofCallNames)
	switch TprofType(r.Type) {
	case TprofPthread:
		calls = len(pthreadFuncs)
	case TprofPyGC, TprofSample:
		calls = 1
	case TprofMemGlibc:
		calls = len(memFuncs)
	}
	if int(r.Type) >= numTprof || int(r.Call) >= calls {
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
	ScEnter   *ebpf.Program  `ebpf:"syscap_tprof_sc_enter"`
	ScExit    *ebpf.Program  `ebpf:"syscap_tprof_sc_exit"`
	Switch    *ebpf.Program  `ebpf:"syscap_tprof_switch"`
	TaskExit  *ebpf.Program  `ebpf:"syscap_tprof_task_exit"`
	PtEnter   *ebpf.Program  `ebpf:"syscap_tprof_pthread_enter"`
	PtExit    *ebpf.Program  `ebpf:"syscap_tprof_pthread_exit"`
	GCStart   *ebpf.Program  `ebpf:"syscap_tprof_gc_start"`
	GCDone    *ebpf.Program  `ebpf:"syscap_tprof_gc_done"`
	UThreads  *ebpf.Map      `ebpf:"tprof_uthreads"`
	Sample    *ebpf.Program  `ebpf:"syscap_tprof_sample"`
	AllocIn   *ebpf.Program  `ebpf:"syscap_tprof_alloc_enter"`
	AllocRet  *ebpf.Program  `ebpf:"syscap_tprof_alloc_return"`
	FreeIn    *ebpf.Program  `ebpf:"syscap_tprof_free_enter"`
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
	for _, c := range []interface{ Close() error }{o.Enter, o.Exit, o.ScEnter, o.ScExit, o.Switch, o.TaskExit, o.PtEnter, o.PtExit, o.GCStart, o.GCDone, o.UThreads, o.Sample, o.AllocIn, o.AllocRet, o.FreeIn, o.Threads, o.Events, o.RingLost,
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
	// SampleHz is oncpu_sample's sampling frequency; 0 is TprofSampleHz.
	SampleHz int
	// HostRoot is where the host's /proc is (GOPHER_HOST_PATH); "" is /.
	HostRoot string
	// Log reports the processes whose uprobes could not be attached.
	Log *slog.Logger
	// Attach is how the syscall programs are attached (AttachAuto: per
	// syscall where the kernel allows).
	Attach AttachMode
}

// TprofSampleHz is oncpu_sample's sampling frequency (gala-gopher's).
const TprofSampleHz = 99

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
	links     map[string]link.Link // sched_switch, sched_process_exit
	enter     *sysHook
	exit      *sysHook
	mask      uint32          // the types enabled
	pthread   *uprobes.Set    // pthread_sync's uprobes, per observed process
	pygc      *uprobes.Set    // python_gc's USDT probes, per observed process
	mem       *uprobes.Set    // mem_glibc's uprobes, per observed process
	clock     *bpfrt.CPUClock // oncpu_sample's sampling
	samplePer time.Duration   // its period
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
	mode, err := resolveMode(slog.Default(), o.Attach)
	if err != nil {
		return nil, err
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
	wake := bpfrt.Wakeup{Records: 256, RecordSize: tprofRecSize, FillPercent: 25}
	if err := bpfrt.ApplyWakeup(spec, "tprof_events", wake); err != nil {
		return nil, fmt.Errorf("syscap: %w", err)
	}
	t := &Tprof{links: map[string]link.Link{}}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("syscap: load tprofiling programs: %w", err)
	}
	t.enter = newSysHook("enter", mode, t.objs.Enter, t.objs.ScEnter)
	t.exit = newSysHook("exit", mode, t.objs.Exit, t.objs.ScExit)
	t.pthread, t.pygc, t.mem = t.uprobeSets(o)
	if o.SampleHz == 0 {
		o.SampleHz = TprofSampleHz
	}
	if o.SampleHz < 1 || o.SampleHz > 10000 {
		t.Close()
		return nil, fmt.Errorf("syscap: oncpu_sample frequency %d Hz: want 1..10000", o.SampleHz)
	}
	t.samplePer = time.Second / time.Duration(o.SampleHz)
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
		Wakeup: wake,
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
	t.mask = mask
	if err := t.objs.MinNs.Set(minNs); err != nil {
		return fmt.Errorf("syscap: set tprof_min_ns: %w", err)
	}
	if err := t.objs.Types.Set(mask); err != nil {
		return fmt.Errorf("syscap: set tprof_types: %w", err)
	}
	names := tprofNames(mask)
	if err := errors.Join(t.enter.set(false, names), t.exit.set(false, names)); err != nil {
		return err
	}
	// sched_switch also takes the stack of a syscall that blocks (the
	// only one a call that never returns gets); the uprobe types need
	// it not.
	sched := mask&^(1<<TprofPthread|1<<TprofPyGC|1<<TprofSample|1<<TprofMemGlibc) != 0
	switch on := mask&(1<<TprofSample) != 0; {
	case on && t.clock == nil:
		c, err := bpfrt.OpenCPUClock(t.objs.Sample, uint64(t.samplePer))
		if err != nil {
			return fmt.Errorf("syscap: oncpu_sample: %w", err)
		}
		t.clock = c
	case !on && t.clock != nil:
		t.clock.Close()
		t.clock = nil
	}
	for _, p := range []struct {
		name string
		prog *ebpf.Program
		on   bool
	}{
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
	progs["syscap_tprof_sc_enter"] = t.objs.ScEnter
	progs["syscap_tprof_sc_exit"] = t.objs.ScExit
	progs["syscap_tprof_switch"] = t.objs.Switch
	progs["syscap_tprof_task_exit"] = t.objs.TaskExit
	progs["syscap_tprof_pthread_enter"] = t.objs.PtEnter
	progs["syscap_tprof_pthread_exit"] = t.objs.PtExit
	progs["syscap_tprof_gc_start"] = t.objs.GCStart
	progs["syscap_tprof_gc_done"] = t.objs.GCDone
	progs["syscap_tprof_sample"] = t.objs.Sample
	progs["syscap_tprof_alloc_enter"] = t.objs.AllocIn
	progs["syscap_tprof_alloc_return"] = t.objs.AllocRet
	progs["syscap_tprof_free_enter"] = t.objs.FreeIn
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
// stack under one id until DeleteStacks removes it, so a caller may cache
// what an id names until then.
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
	for _, u := range []*uprobes.Set{t.pthread, t.pygc, t.mem} {
		if u != nil {
			u.Close()
		}
	}
	t.clock.Close()
	t.clock = nil
	for name, l := range t.links {
		errs = append(errs, l.Close())
		delete(t.links, name)
	}
	if t.enter != nil {
		errs = append(errs, t.enter.close(), t.exit.close())
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

// uprobeSets are pthread_sync's and python_gc's uprobes: attached per
// observed process (UprobeOptions.PID), so the lock calls of the rest of
// the machine do not trap.
func (t *Tprof) uprobeSets(o TprofOptions) (pthread, pygc, mem *uprobes.Set) {
	root := o.HostRoot
	if root == "" {
		root = "/"
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	report := func(item string) (warn, info func(string, ...any)) {
		l := log.With("sub_item", item)
		return func(msg string, args ...any) { l.Warn("tprofiling: "+item+": "+msg, args...) },
			func(msg string, args ...any) { l.Debug("tprofiling: "+item+": "+msg, args...) }
	}
	pt := &uprobes.Set{Root: root, Match: uprobes.IsLibc, PerProcess: true, Multi: true, Probes: t.pthreadProbes}
	pt.Warn, pt.Info = report("pthread_sync")
	gc := &uprobes.Set{Root: root, PerProcess: true, Probes: t.pygcProbes, Match: func(base string) bool {
		return strings.HasPrefix(base, "python") || strings.HasPrefix(base, "libpython")
	}}
	gc.Warn, gc.Info = report("python_gc")
	mem = &uprobes.Set{Root: root, Match: uprobes.IsLibc, PerProcess: true, Multi: true, Probes: t.memProbes}
	mem.Warn, mem.Info = report("mem_glibc")
	return pt, gc, mem
}

// memProbes are mem_glibc's: the allocators' returns, their entries and
// free's entry (three uprobe_multi links).
func (t *Tprof) memProbes(path string) ([]uprobes.Probe, error) {
	offs, err := uprobes.DefaultSymbols(path, memFuncs[1:])
	if err != nil {
		return nil, err
	}
	var out []uprobes.Probe
	for _, step := range []struct {
		prog *ebpf.Program
		ret  bool
	}{{t.objs.AllocRet, true}, {t.objs.AllocIn, false}} {
		for id := 1; id < int(MemFree); id++ {
			off, ok := offs[memFuncs[id]]
			if !ok {
				return nil, fmt.Errorf("%s: no %s", filepath.Base(path), memFuncs[id])
			}
			out = append(out, uprobes.Probe{Symbol: memFuncs[id], Address: off, Prog: step.prog, Ret: step.ret, Cookie: uint64(id)})
		}
	}
	off, ok := offs["free"]
	if !ok {
		return nil, fmt.Errorf("%s: no free", filepath.Base(path))
	}
	return append(out, uprobes.Probe{Symbol: "free", Address: off, Prog: t.objs.FreeIn, Cookie: uint64(MemFree)}), nil
}

// pthreadProbes are the pthread functions of a C library (the default
// version of each), return probes first.
func (t *Tprof) pthreadProbes(path string) ([]uprobes.Probe, error) {
	offs, err := uprobes.DefaultSymbols(path, pthreadFuncs[:])
	if err != nil {
		return nil, err
	}
	if runtime.GOARCH == "amd64" {
		// A uprobe cannot replace an instruction with a lock prefix
		// (pthread_spin_lock's first one): one such address would fail
		// the whole uprobe_multi link.
		locked, err := uprobes.LockPrefixed(path, offs)
		if err != nil {
			return nil, err
		}
		for _, name := range locked {
			delete(offs, name)
		}
	}
	var out []uprobes.Probe
	for _, ret := range []bool{true, false} {
		for id, name := range pthreadFuncs {
			off, ok := offs[name]
			if !ok {
				continue
			}
			prog := t.objs.PtEnter
			if ret {
				prog = t.objs.PtExit
			}
			out = append(out, uprobes.Probe{Symbol: name, Address: off, Prog: prog, Ret: ret, Cookie: uint64(id)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no pthread function", filepath.Base(path))
	}
	return out, nil
}

// pygcProbes are CPython's python:gc__start (generation) and
// python:gc__done (objects collected) USDT probes; a python built without
// them is an error (the set logs it once per process).
func (t *Tprof) pygcProbes(path string) ([]uprobes.Probe, error) {
	var out []uprobes.Probe
	for _, n := range []struct {
		name string
		prog *ebpf.Program
	}{{"gc__start", t.objs.GCStart}, {"gc__done", t.objs.GCDone}} {
		u, err := uprobes.FindUSDT(path, "python", n.name)
		if errors.Is(err, uprobes.ErrNoNote) {
			return nil, fmt.Errorf("%w: a python built without --with-dtrace, its collections are not seen", err)
		}
		if err != nil {
			return nil, err
		}
		if len(u.Args) != 1 {
			return nil, fmt.Errorf("%s: python:%s has %d arguments, want 1", filepath.Base(path), n.name, len(u.Args))
		}
		cookie, err := uprobes.ArgCookie(u.Args[0], runtime.GOARCH)
		if err != nil {
			return nil, err
		}
		out = append(out, uprobes.Probe{Symbol: "python:" + n.name, Address: u.Offset, RefCtr: u.Semaphore, Prog: n.prog, Cookie: cookie})
	}
	return out, nil
}

// ScanUprobes attaches pthread_sync's and python_gc's uprobes to the
// observed processes new since the last scan and detaches those of the
// processes gone, or all of a type turned off. A process is seen from
// the scan after its start: call it every tick.
func (t *Tprof) ScanUprobes(observed func(pid int) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range []struct {
		set *uprobes.Set
		typ TprofType
	}{{t.pthread, TprofPthread}, {t.pygc, TprofPyGC}, {t.mem, TprofMemGlibc}} {
		if t.mask&(1<<u.typ) == 0 {
			u.set.Close()
			continue
		}
		u.set.Scan(observed)
	}
}

// HeldStacks are the stack ids the threads' rows name: of their calls in
// progress, and those they went off the CPU in.
func (t *Tprof) HeldStacks() (map[int32]bool, error) {
	held := map[int32]bool{}
	var (
		tid uint32
		v   syscapSyscapTprofThread
	)
	it := t.objs.Threads.Iterate()
	for it.Next(&tid, &v) {
		held[v.ScStack], held[v.OffStack] = true, true
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("syscap: read tprof_threads: %w", err)
	}
	return held, nil
}

// StackIDs are the ids tprof_stacks holds now.
func (t *Tprof) StackIDs() ([]int32, error) {
	var (
		id  int32
		ids []int32
	)
	it := t.objs.Stacks.Iterate()
	var pcs [TprofStackDepth]uint64
	for it.Next(&id, &pcs) {
		ids = append(ids, id)
	}
	if err := it.Err(); err != nil {
		return ids, fmt.Errorf("syscap: read tprof_stacks: %w", err)
	}
	return ids, nil
}

// DeleteStacks removes the stacks of ids from tprof_stacks but those a
// thread's row still names (the stack of its call in progress, or the
// one it went off the CPU in, which its next off-CPU event carries), and
// returns the ids removed. The kernel then gives a removed id to the
// next new stack that hashes to it: a caller caching what an id names
// forgets the removed ones.
func (t *Tprof) DeleteStacks(ids []int32) ([]int32, error) {
	held, err := t.HeldStacks()
	if err != nil {
		return nil, err
	}
	var done []int32
	for _, id := range ids {
		if held[id] {
			continue
		}
		if err := t.objs.Stacks.Delete(&id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return done, fmt.Errorf("syscap: delete tprof_stacks[%d]: %w", id, err)
		}
		done = append(done, id)
	}
	return done, nil
}
