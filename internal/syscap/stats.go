package syscap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/snoop"
)

// SyscallClass is a class of syscalls timed per process (enum
// syscap_sc_class). ClassAll is every syscall; only its failures are
// counted.
type SyscallClass = syscapSyscapScClass

// The classes.
const (
	ClassAll        = syscapSyscapScClassSYSCAP_SC_ALL
	ClassRead       = syscapSyscapScClassSYSCAP_SC_READ
	ClassWrite      = syscapSyscapScClassSYSCAP_SC_WRITE
	ClassMount      = syscapSyscapScClassSYSCAP_SC_MOUNT
	ClassUmount     = syscapSyscapScClassSYSCAP_SC_UMOUNT
	ClassFsync      = syscapSyscapScClassSYSCAP_SC_FSYNC
	ClassSendmsg    = syscapSyscapScClassSYSCAP_SC_SENDMSG
	ClassRecvmsg    = syscapSyscapScClassSYSCAP_SC_RECVMSG
	ClassSchedYield = syscapSyscapScClassSYSCAP_SC_SCHED_YIELD
	ClassFutex      = syscapSyscapScClassSYSCAP_SC_FUTEX
	ClassEpollWait  = syscapSyscapScClassSYSCAP_SC_EPOLL_WAIT
	ClassEpollPwait = syscapSyscapScClassSYSCAP_SC_EPOLL_PWAIT
	ClassFork       = syscapSyscapScClassSYSCAP_SC_FORK
	ClassVfork      = syscapSyscapScClassSYSCAP_SC_VFORK
	ClassClone      = syscapSyscapScClassSYSCAP_SC_CLONE
	// Timed for the file-system rows only.
	ClassPread     = syscapSyscapScClassSYSCAP_SC_PREAD
	ClassPwrite    = syscapSyscapScClassSYSCAP_SC_PWRITE
	ClassOpen      = syscapSyscapScClassSYSCAP_SC_OPEN
	ClassFdatasync = syscapSyscapScClassSYSCAP_SC_FDATASYNC
	// ClassIoctl is ioctl; its row also says the fd and command of the
	// longest call.
	ClassIoctl = syscapSyscapScClassSYSCAP_SC_IOCTL
	NumClasses = int(syscapSyscapScClassSYSCAP_SC_MAX)
)

// FS is a file system with rows of its own (SetFS).
type FS uint32

// The file systems: ext4 (ext2 and ext3 share its magic number and, on
// current kernels, its driver), overlay, tmpfs.
const (
	FSExt4 FS = iota
	FSOverlay
	FSTmpfs
	numFS
)

// FSOp is a file operation of the per-file-system rows.
type FSOp uint32

// The operations: read (read, pread64, readv, preadv, preadv2), write
// (write, pwrite64, writev, pwritev, pwritev2), open (open, openat,
// openat2, creat: the returned file's system) and flush (fsync,
// fdatasync).
const (
	OpRead FSOp = iota
	OpWrite
	OpOpen
	OpFlush
	numFSOps
)

// FSClass is the class of the rows of op on files of fs.
func FSClass(fs FS, op FSOp) SyscallClass {
	return syscapSyscapScClassSYSCAP_SC_FS + SyscallClass(uint32(fs)*uint32(numFSOps)+uint32(op))
}

// SyscallStat is one process's syscalls of one class since the last Drain.
// For ClassAll only Failed is set: the failed syscalls of every kind.
type SyscallStat struct {
	TGID   uint32
	Class  SyscallClass
	Calls  uint64 // completed calls
	Failed uint64 // calls that returned an error
	NsSum  uint64 // latency, entry to exit, ns
	NsMax  uint64
	// ClassIoctl: the fd and command of the longest call (IoctlSet false
	// when they were not recorded: a full table).
	IoctlFD, IoctlCmd uint32
	IoctlSet          bool
}

// statsObjects are what the syscall statistics need of the capture object:
// LoadAndAssign loads these and nothing else (not the l7 programs, maps
// and ring buffer).
type statsObjects struct {
	Enter   *ebpf.Program `ebpf:"syscap_stat_enter"`
	Exit    *ebpf.Program `ebpf:"syscap_stat_exit"`
	ScEnter *ebpf.Program `ebpf:"syscap_stat_sc_enter"`
	ScExit  *ebpf.Program `ebpf:"syscap_stat_sc_exit"`
	Rows    *ebpf.Map     `ebpf:"sc_stats"`
	Ioctl   *ebpf.Map     `ebpf:"sc_ioctl"`
	Lost    *ebpf.Map     `ebpf:"sc_lost"`
	// Classes is sc_classes: bit 1<<class enables a timed class, bit 0
	// the failure count.
	Classes *ebpf.Variable `ebpf:"sc_classes"`
	// FS is sc_fs: the per-file-system rows are on.
	FS *ebpf.Variable `ebpf:"sc_fs"`

	FilterCfg     *ebpf.Variable `ebpf:"galago_filter_cfg"`
	FilterTgids   *ebpf.Map      `ebpf:"filter_tgids"`
	FilterCgroups *ebpf.Map      `ebpf:"filter_cgroups"`
	FilterPending *ebpf.Map      `ebpf:"filter_pending"`
	FilterDecided *ebpf.Map      `ebpf:"filter_decided"`
	FilterLost    *ebpf.Map      `ebpf:"filter_pending_lost"`
	FilterFork    *ebpf.Program  `ebpf:"galago_filter_fork"`
	FilterExec    *ebpf.Program  `ebpf:"galago_filter_exec"`
}

func (o *statsObjects) close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.Enter, o.Exit, o.ScEnter, o.ScExit, o.Rows, o.Ioctl, o.Lost, o.FilterTgids, o.FilterCgroups,
		o.FilterPending, o.FilterDecided, o.FilterLost, o.FilterFork, o.FilterExec} {
		if c != nil && !isNilCloser(c) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

func isNilCloser(c interface{ Close() error }) bool {
	switch v := c.(type) {
	case *ebpf.Program:
		return v == nil
	case *ebpf.Map:
		return v == nil
	}
	return false
}

// Stats is the capture object's per-process syscall statistics (for the
// proc probe): failures of every syscall and the latency of the timed
// classes, aggregated in the kernel per (process, class). It is a separate
// load of the same object with its own snooper filter, so it costs the l7
// capture nothing and the l7 capture costs it nothing.
type Stats struct {
	objs        statsObjects
	enter, exit *sysHook
	filter      *bpfrt.FilterSync

	mu   sync.Mutex
	lost bpfrt.LostCounter
}

// OpenStats loads the statistics programs and applies the snoopers t (nil:
// every process); SetClasses attaches them; onLost (may be nil) receives
// the calls not counted because the table was full and the new processes
// the snooper filter could not mark pending. The programs are attached per
// syscall (AttachAuto, EnvAttach), but for the failure count of every
// syscall (ClassAll), which keeps the raw sys_exit.
func OpenStats(t snoop.Targets, onLost func(uint64)) (*Stats, error) {
	for _, tp := range []string{"sys_enter", "sys_exit"} {
		if err := bpfrt.HaveTPBTF(tp); err != nil {
			return nil, err
		}
	}
	mode, err := resolveMode(slog.Default(), AttachAuto)
	if err != nil {
		return nil, err
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("syscap: load spec: %w", err)
	}
	s := &Stats{}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("syscap: load statistics programs: %w", err)
	}
	s.enter = newSysHook("enter", mode, s.objs.Enter, s.objs.ScEnter)
	s.exit = newSysHook("exit", mode, s.objs.Exit, s.objs.ScExit)
	s.lost = bpfrt.LostCounter{Map: s.objs.Lost, OnLost: onLost}
	if s.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: s.objs.FilterCfg, TGIDs: s.objs.FilterTgids, Cgroups: s.objs.FilterCgroups,
		Pending: s.objs.FilterPending, Decided: s.objs.FilterDecided, Lost: s.objs.FilterLost,
		ForkProgram: s.objs.FilterFork, ExecProgram: s.objs.FilterExec,
	}, onLost); err != nil {
		s.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	if err := s.filter.Sync(t); err != nil {
		s.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	return s, nil
}

// attachLocked attaches the programs for the classes of mask and fs:
// sys_enter for the timed syscalls, sys_exit for them too, or for every
// syscall when failures are counted.
func (s *Stats) attachLocked(mask uint32, fs bool) error {
	names := statsSyscalls(mask, fs)
	err := errors.Join(s.enter.set(false, names), s.exit.set(mask&(1<<ClassAll) != 0, names))
	if err != nil {
		return errors.Join(err, s.detachLocked())
	}
	return nil
}

func (s *Stats) detachLocked() error {
	if s.enter == nil {
		return nil
	}
	return errors.Join(s.enter.close(), s.exit.close())
}

// SetClasses enables the timed classes given (ClassAll: the failure
// count) and, with fs, the per-file-system rows (FSClass); the others are
// not counted. The programs are attached while something is enabled, and
// detached (no cost per syscall) when nothing is.
func (s *Stats) SetClasses(fs bool, classes ...SyscallClass) error {
	var mask uint32
	for _, c := range classes {
		if int(c) >= NumClasses || (c >= syscapSyscapScClassSYSCAP_SC_FS && c != ClassIoctl) {
			return fmt.Errorf("syscap: no timed syscall class %d", c)
		}
		mask |= 1 << c
	}
	var fsOn uint32
	if fs {
		fsOn = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.objs.Classes.Set(mask); err != nil {
		return fmt.Errorf("syscap: set sc_classes: %w", err)
	}
	if err := s.objs.FS.Set(fsOn); err != nil {
		return fmt.Errorf("syscap: set sc_fs: %w", err)
	}
	return s.attachLocked(mask, fs)
}

// SetTargets applies the snoopers (nil: every process).
func (s *Stats) SetTargets(t snoop.Targets) error { return s.filter.Sync(t) }

// Run follows the snoopers (new processes, exits) until ctx is done.
func (s *Stats) Run(ctx context.Context) error { return s.filter.Run(ctx) }

// Programs are the programs by name, for bpfrt.Stats.
func (s *Stats) Programs() map[string]*ebpf.Program {
	progs := s.filter.Programs()
	progs["syscap_stat_enter"] = s.objs.Enter
	progs["syscap_stat_exit"] = s.objs.Exit
	progs["syscap_stat_sc_enter"] = s.objs.ScEnter
	progs["syscap_stat_sc_exit"] = s.objs.ScExit
	return progs
}

// Drain returns every (process, class) row counted since the last Drain
// and removes it, so a process that has exited is reported once more and
// then forgotten. A call that completes while its row is being read and
// removed may be lost (a window of microseconds per row).
func (s *Stats) Drain() ([]SyscallStat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SyscallStat
	err := bpfrt.TakeAll(s.objs.Rows, func(k syscapSyscapScKey, v syscapSyscapScVal) {
		out = append(out, SyscallStat{TGID: k.Tgid, Class: SyscallClass(k.Class), Calls: v.Calls, Failed: v.Failed,
			NsSum: v.NsSum, NsMax: v.NsMax})
	})
	if err != nil {
		return out, fmt.Errorf("syscap: %w", err)
	}
	ioctls := map[uint32]syscapSyscapScIoctl{}
	if err := bpfrt.TakeAll(s.objs.Ioctl, func(tgid uint32, v syscapSyscapScIoctl) { ioctls[tgid] = v }); err != nil {
		return out, fmt.Errorf("syscap: %w", err)
	}
	for i := range out {
		if v, ok := ioctls[out[i].TGID]; ok && out[i].Class == ClassIoctl {
			out[i].IoctlFD, out[i].IoctlCmd, out[i].IoctlSet = v.Fd, v.Cmd, true
		}
	}
	if err := s.lost.Poll(); err != nil {
		return out, fmt.Errorf("syscap: %w", err)
	}
	return out, nil
}

// Close detaches and unloads everything. Idempotent; call it after Run
// has returned.
func (s *Stats) Close() error {
	s.mu.Lock()
	errs := []error{s.detachLocked()}
	s.mu.Unlock()
	if s.filter != nil {
		errs = append(errs, s.filter.Close())
		s.filter = nil
	}
	errs = append(errs, s.objs.close())
	s.objs = statsObjects{}
	return errors.Join(errs...)
}
