package bpfrt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
)

// ErrHookUnavailable marks a hook this kernel does not offer. HookError
// wraps it; errors.Is(err, ebpf.ErrNotSupported) also holds when the kernel
// said so.
var ErrHookUnavailable = errors.New("hook unavailable")

// HookError names the missing hook and why.
type HookError struct {
	Hook string // e.g. "tracepoint/tcp/tcp_retransmit_skb"
	Err  error
}

func (e *HookError) Error() string { return fmt.Sprintf("hook %s unavailable: %v", e.Hook, e.Err) }

// Unwrap lets errors.Is match both ErrHookUnavailable and the cause.
func (e *HookError) Unwrap() []error { return []error{ErrHookUnavailable, e.Err} }

func hookErr(hook string, err error) error {
	if err == nil {
		return nil
	}
	return &HookError{Hook: hook, Err: err}
}

// tracefsRoots are where tracefs may be mounted, newest convention first.
var tracefsRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// HaveTracepoint reports whether tracepoint group/name exists and
// tracepoint programs load. Tracepoint links need tracefs mounted (the
// event id is read from it): an unmounted tracefs is reported as such.
func HaveTracepoint(group, name string) error {
	hook := "tracepoint/" + group + "/" + name
	if err := features.HaveProgramType(ebpf.TracePoint); err != nil {
		return hookErr(hook, err)
	}
	mounted := false
	for _, root := range tracefsRoots {
		if _, err := os.Stat(root + "/events"); err != nil {
			continue
		}
		mounted = true
		if _, err := os.Stat(root + "/events/" + group + "/" + name + "/id"); err == nil {
			return nil
		}
	}
	if !mounted {
		return hookErr(hook, errors.New("tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)"))
	}
	return hookErr(hook, errors.New("no such tracepoint"))
}

// The answers of haveBTFTrace never change while the kernel runs, so they
// are kept; the parsed kernel BTF they come from is not: it is ~4 MiB of
// live heap (near half of the daemon's at rest, doubled by the GC's
// headroom) and only needed while probes start. It is dropped btfIdle
// after its last use and parsed again (~50 ms) if a later start asks a
// new question.
var (
	btfMu     sync.Mutex
	btfTraces = map[string]error{}
	btfSpec   *btf.Spec
	btfDrop   *time.Timer
)

const btfIdle = 10 * time.Second

// haveBTFTrace reports whether the kernel BTF declares btf_trace_<name>,
// the typedef raw and BTF tracepoints are resolved through.
func haveBTFTrace(name string) error {
	btfMu.Lock()
	defer btfMu.Unlock()
	if err, ok := btfTraces[name]; ok {
		return err
	}
	if btfSpec == nil {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			err = fmt.Errorf("kernel BTF: %w", err)
			btfTraces[name] = err
			return err
		}
		btfSpec = spec
	}
	if btfDrop == nil {
		btfDrop = time.AfterFunc(btfIdle, func() {
			btfMu.Lock()
			btfSpec = nil
			btfMu.Unlock()
			// Parsing the BTF made ~30 MB of garbage, the daemon's
			// largest; give the pages back now rather than over minutes
			// of background scavenging (one GC, once per start-up).
			debug.FreeOSMemory()
		})
	} else {
		btfDrop.Reset(btfIdle)
	}
	var td *btf.Typedef
	err := btfSpec.TypeByName("btf_trace_"+name, &td)
	if err != nil {
		err = fmt.Errorf("btf_trace_%s not in kernel BTF: %w", name, err)
	}
	btfTraces[name] = err
	return err
}

// HaveRawTracepoint reports whether raw_tp/<name> can be used.
func HaveRawTracepoint(name string) error {
	hook := "raw_tp/" + name
	if err := features.HaveProgramType(ebpf.RawTracepoint); err != nil {
		return hookErr(hook, err)
	}
	return hookErr(hook, haveBTFTrace(name))
}

// HaveTPBTF reports whether tp_btf/<name> loads: the kernel has BTF, knows
// btf_trace_<name>, and accepts a BTF-typed tracing program for it. The
// last step matters: a kernel can allow tp_btf while refusing fentry.
func HaveTPBTF(name string) error {
	hook := "tp_btf/" + name
	if err := haveBTFTrace(name); err != nil {
		return hookErr(hook, err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:       ebpf.Tracing,
		AttachType: ebpf.AttachTraceRawTp,
		AttachTo:   name,
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		return hookErr(hook, err)
	}
	return prog.Close()
}

// HaveKprobe reports whether kprobes can be attached: the program type
// alone is not enough (uprobes use it too), the kernel also needs the
// kprobe PMU or tracefs kprobe_events (CONFIG_KPROBES).
func HaveKprobe() error {
	if err := features.HaveProgramType(ebpf.Kprobe); err != nil {
		return hookErr("kprobe", err)
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/kprobe/type"); err == nil {
		return nil
	}
	for _, root := range tracefsRoots {
		if _, err := os.Stat(root + "/kprobe_events"); err == nil {
			return nil
		}
	}
	return hookErr("kprobe", fmt.Errorf("no kprobe PMU or kprobe_events (CONFIG_KPROBES off?): %w", ebpf.ErrNotSupported))
}

// HaveFentry reports whether fentry/fexit programs load (cilium/ebpf's
// probe loads an fentry program on bpf_init).
func HaveFentry() error {
	return hookErr("fentry", features.HaveProgramType(ebpf.Tracing))
}

// HaveCgroup2 returns the cgroup2 mount point (the one whose root is the
// hierarchy root), from /proc/self/mountinfo.
func HaveCgroup2() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", hookErr("cgroup2", err)
	}
	defer f.Close()
	mnt, err := parseCgroup2Mount(f)
	return mnt, hookErr("cgroup2", err)
}

// parseCgroup2Mount finds the first cgroup2 mount of the hierarchy root in
// mountinfo(5) text.
func parseCgroup2Mount(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" || fields[3] != "/" {
			continue
		}
		return unescapeMountPath(fields[4]), nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no cgroup2 mount")
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// MissingHooks logs each missing hook once, as one line naming the hook and
// what it disables:
//
//	hook tracepoint/tcp/tcp_retransmit_skb unavailable: disables retran_packets (no such tracepoint)
//
// Safe for concurrent use; keep one per daemon so probe restarts stay quiet.
type MissingHooks struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[string]bool
}

// NewMissingHooks logs through log.
func NewMissingHooks(log *slog.Logger) *MissingHooks {
	return &MissingHooks{log: log, seen: map[string]bool{}}
}

// OrNew is m, or when m is nil (a probe given no daemon-wide reporter) a
// new MissingHooks logging through log.
func (m *MissingHooks) OrNew(log *slog.Logger) *MissingHooks {
	if m != nil {
		return m
	}
	return NewMissingHooks(log)
}

// Report logs err (from a Have* check) once per hook; disables lists the
// metrics or features that will be missing. It returns err unchanged, so
// callers can write `if err := m.Report(HaveX(), "a"); err != nil`.
func (m *MissingHooks) Report(err error, disables ...string) error {
	if err == nil {
		return nil
	}
	hook, cause := "unknown", err
	var he *HookError
	if errors.As(err, &he) {
		hook, cause = he.Hook, he.Err
	}
	m.mu.Lock()
	first := !m.seen[hook]
	m.seen[hook] = true
	m.mu.Unlock()
	if first {
		m.log.Warn(fmt.Sprintf("hook %s unavailable: disables %s (%v)", hook, strings.Join(disables, ", "), cause))
	}
	return err
}
