package syscap

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// AttachMode says how the programs on syscall entry and exit are attached.
type AttachMode int

const (
	// AttachAuto is AttachSyscalls where the per-syscall tracepoints can
	// be used, AttachRaw otherwise; EnvAttach overrides it.
	AttachAuto AttachMode = iota
	// AttachRaw attaches tp_btf programs to the raw sys_enter/sys_exit
	// tracepoints: every syscall of every process on the host runs them.
	AttachRaw
	// AttachSyscalls attaches tracepoint programs to syscalls:sys_enter_
	// <name> and sys_exit_<name> for the syscalls a consumer needs only:
	// the others run no program (the kernel's syscall tracing checks a
	// bitmap and returns). A consumer that needs every syscall (the
	// failure count of the proc probe) keeps the raw tracepoint for that
	// program.
	AttachSyscalls
)

// EnvAttach names the environment variable that forces the mode of
// AttachAuto: "raw" or "syscalls" (tests run the capture in both).
const EnvAttach = "GALAGO_SYSCAP_ATTACH"

func (m AttachMode) String() string {
	switch m {
	case AttachRaw:
		return "raw"
	case AttachSyscalls:
		return "syscalls"
	}
	return "auto"
}

// ParseAttachMode parses "auto", "raw" or "syscalls".
func ParseAttachMode(s string) (AttachMode, error) {
	for _, m := range []AttachMode{AttachAuto, AttachRaw, AttachSyscalls} {
		if s == m.String() {
			return m, nil
		}
	}
	return AttachAuto, fmt.Errorf("syscap: attach mode %q: want auto, raw or syscalls", s)
}

// syscallsRoot is where tracefs is mounted (or mounted by galago).
const syscallsRoot = "/sys/kernel/tracing"

// perSyscall says whether the syscalls:* tracepoints can be attached:
// tracefs mounted (galago mounts it when it is not, as root), with the
// syscall events (CONFIG_FTRACE_SYSCALLS). Decided once per process, and
// said once in the log when they cannot.
var perSyscall = sync.OnceValues(func() (bool, error) {
	for _, root := range []string{syscallsRoot, "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(root + "/events/syscalls"); err == nil {
			return true, nil
		}
	}
	if _, err := os.Stat(syscallsRoot + "/events"); err == nil {
		return false, errors.New("tracefs has no syscall events (CONFIG_FTRACE_SYSCALLS off)")
	}
	if err := unix.Mount("tracefs", syscallsRoot, "tracefs", 0, ""); err != nil {
		return false, fmt.Errorf("tracefs is not mounted and mounting it at %s failed: %w", syscallsRoot, err)
	}
	if _, err := os.Stat(syscallsRoot + "/events/syscalls"); err != nil {
		return false, errors.New("tracefs has no syscall events (CONFIG_FTRACE_SYSCALLS off)")
	}
	return true, nil
})

var logRawOnce sync.Once

// resolveMode turns AttachAuto into the mode to use.
func resolveMode(log *slog.Logger, m AttachMode) (AttachMode, error) {
	if m == AttachAuto {
		if v, ok := os.LookupEnv(EnvAttach); ok {
			env, err := ParseAttachMode(v)
			if err != nil {
				return m, fmt.Errorf("%s: %w", EnvAttach, err)
			}
			m = env
		}
	}
	if m == AttachRaw {
		return m, nil
	}
	ok, why := perSyscall()
	if ok {
		return AttachSyscalls, nil
	}
	if m == AttachSyscalls {
		return m, fmt.Errorf("syscap: per-syscall tracepoints: %w", why)
	}
	logRawOnce.Do(func() {
		log.Warn("syscap: per-syscall tracepoints unavailable; using the raw sys_enter/sys_exit tracepoints (every syscall runs the programs)", "err", why)
	})
	return AttachRaw, nil
}

// notOnArch are syscalls this architecture does not have (asm-generic
// dropped them): their tracepoints do not exist and nothing is missed.
func notOnArch(name string) bool {
	if runtime.GOARCH != "arm64" {
		return false
	}
	switch name {
	case "open", "creat", "fork", "vfork", "epoll_wait", "select", "poll":
		return true
	}
	return false
}

// sysHook is one program body on syscall entry or exit, attached in one of
// the two modes: the tp_btf program on the raw tracepoint, or the
// tracepoint program on syscalls:sys_<dir>_<name> for each syscall of a
// set (the names are the kernel's SYSCALL_DEFINE names: umount2 is
// "umount").
type sysHook struct {
	dir     string // "enter" or "exit"
	raw, tp *ebpf.Program
	mode    AttachMode // AttachRaw or AttachSyscalls
	rawLink link.Link
	tps     map[string]link.Link
}

func newSysHook(dir string, mode AttachMode, raw, tp *ebpf.Program) *sysHook {
	return &sysHook{dir: dir, mode: mode, raw: raw, tp: tp, tps: map[string]link.Link{}}
}

// set attaches the program for the syscalls names, or for every syscall
// when all is set (the raw tracepoint in either mode), and detaches what
// is no longer wanted; nothing wanted detaches everything.
func (h *sysHook) set(all bool, names []string) error {
	if h.mode == AttachRaw && len(names) > 0 {
		all = true
	}
	if all {
		if h.rawLink == nil {
			l, err := link.AttachTracing(link.TracingOptions{Program: h.raw, AttachType: ebpf.AttachTraceRawTp})
			if err != nil {
				return fmt.Errorf("syscap: attach tp_btf/sys_%s: %w", h.dir, err)
			}
			h.rawLink = l
		}
		return h.closeTPs(nil)
	}
	// Attach the new ones before the raw link goes, so that no call in
	// between is missed (one counted twice is the lesser harm there).
	for _, n := range names {
		if notOnArch(n) {
			continue
		}
		if _, ok := h.tps[n]; ok {
			continue
		}
		l, err := link.Tracepoint("syscalls", "sys_"+h.dir+"_"+n, h.tp, nil)
		if err != nil {
			return fmt.Errorf("syscap: attach tracepoint/syscalls/sys_%s_%s: %w", h.dir, n, err)
		}
		h.tps[n] = l
	}
	var errs []error
	if h.rawLink != nil {
		errs = append(errs, h.rawLink.Close())
		h.rawLink = nil
	}
	errs = append(errs, h.closeTPs(names))
	return errors.Join(errs...)
}

// closeTPs detaches the per-syscall links not in keep.
func (h *sysHook) closeTPs(keep []string) error {
	var errs []error
	for n, l := range h.tps {
		if !slices.Contains(keep, n) {
			errs = append(errs, l.Close())
			delete(h.tps, n)
		}
	}
	return errors.Join(errs...)
}

// prog is the program that runs (the per-syscall one when neither is
// attached).
func (h *sysHook) prog() *ebpf.Program {
	if h.rawLink != nil {
		return h.raw
	}
	return h.tp
}

func (h *sysHook) close() error {
	if h == nil {
		return nil
	}
	return h.set(false, nil)
}

// captureSyscalls are the syscalls syscap_exit handles.
var captureSyscalls = []string{"read", "write", "recvfrom", "sendto", "readv", "writev", "recvmsg", "sendmsg",
	"recvmmsg", "sendmmsg", "close"}

// exitSyscalls are the syscalls syscap_exit handles: every data syscall
// and close (captureSyscalls) without the sock hooks; beside them, the
// *mmsg calls and close, and recvfrom/recvmsg while a datagram protocol
// (DNS) is enabled, for a datagram's source address (a TCP socket's
// recvfrom leaves at one lookup, but the dispatch alone is ~160 ns: recv()
// is recvfrom).
func exitSyscalls(sockHooks, datagrams bool) []string {
	switch {
	case !sockHooks:
		return captureSyscalls
	case datagrams:
		return []string{"recvfrom", "recvmsg", "recvmmsg", "sendmmsg", "close"}
	}
	return []string{"recvmmsg", "sendmmsg", "close"}
}

// classSyscalls are the syscalls of each timed class of the statistics
// (sc_class in syscap.bpf.c).
var classSyscalls = map[SyscallClass][]string{
	ClassRead: {"read"}, ClassWrite: {"write"}, ClassMount: {"mount"}, ClassUmount: {"umount"},
	ClassFsync: {"fsync"}, ClassSendmsg: {"sendmsg"}, ClassRecvmsg: {"recvmsg"},
	ClassSchedYield: {"sched_yield"}, ClassFutex: {"futex"}, ClassEpollWait: {"epoll_wait"},
	ClassEpollPwait: {"epoll_pwait", "epoll_pwait2"}, ClassFork: {"fork"}, ClassVfork: {"vfork"},
	ClassClone: {"clone", "clone3"}, ClassPread: {"pread64", "readv", "preadv", "preadv2"},
	ClassPwrite: {"pwrite64", "writev", "pwritev", "pwritev2"}, ClassOpen: {"open", "creat", "openat", "openat2"},
	ClassFdatasync: {"fdatasync"}, ClassIoctl: {"ioctl"},
}

// fsClasses are the timed classes of the per-file-system rows (sc_fs_op).
var fsClasses = []SyscallClass{ClassRead, ClassPread, ClassWrite, ClassPwrite, ClassOpen, ClassFsync, ClassFdatasync}

// statsSyscalls are the syscalls timed for the classes of mask (bit 1 <<
// class) and, with fs, the per-file-system rows.
func statsSyscalls(mask uint32, fs bool) []string {
	var names []string
	add := func(c SyscallClass) {
		for _, n := range classSyscalls[c] {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	for c := SyscallClass(1); int(c) < NumClasses; c++ {
		if mask&(1<<c) != 0 {
			add(c)
		}
	}
	if fs {
		for _, c := range fsClasses {
			add(c)
		}
	}
	return names
}

// tprofSyscalls are the syscalls of each tprofiling type (tprof_call_of
// in tprof.bpf.h); a file call on a socket is a net event, so net
// takes the file calls too.
var tprofSyscalls = map[TprofType][]string{
	TprofFile: {"read", "write", "readv", "writev", "preadv", "pwritev", "sync", "fsync", "fdatasync"},
	TprofNet:  {"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg"},
	TprofSched: {"sched_yield", "nanosleep", "clock_nanosleep", "wait4", "select", "pselect6", "poll", "ppoll",
		"epoll_wait", "epoll_pwait", "epoll_pwait2"},
	TprofLock: {"futex"},
}

// tprofNames are the syscalls traced for the types of mask.
func tprofNames(mask uint32) []string {
	var names []string
	if mask&(1<<TprofFile|1<<TprofNet) != 0 {
		names = append(names, tprofSyscalls[TprofFile]...)
	}
	for _, ty := range []TprofType{TprofNet, TprofSched, TprofLock} {
		if mask&(1<<ty) != 0 {
			names = append(names, tprofSyscalls[ty]...)
		}
	}
	return names
}
