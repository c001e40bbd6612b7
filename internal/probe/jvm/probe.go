package jvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/periodic"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/table"
)

// Name is the feature name.
const Name = "jvm"

// defaultAttachTimeout bounds each attach step (listener start, one
// command).
const defaultAttachTimeout = 5 * time.Second

// Probe is the jvm feature. See the package documentation.
type Probe struct {
	fs            procfs.FS
	attachTimeout time.Duration
	loopOpts      []periodic.Option
	loop          *periodic.Loop
	ctx           context.Context

	// jvms are the JVMs seen, by pid; used only by the loop's goroutine.
	jvms map[int]*jvmState
}

var (
	_ probe.Probe  = (*Probe)(nil)
	_ probe.Tables = (*Probe)(nil)
)

// Option configures a Probe.
type Option func(*Probe)

func withInterval(d time.Duration) Option {
	return func(p *Probe) { p.loopOpts = append(p.loopOpts, periodic.Interval(d)) }
}

// New returns a stopped jvm probe reading the host under fsys.
func New(fsys procfs.FS, opts ...Option) *Probe {
	p := &Probe{fs: fsys, attachTimeout: defaultAttachTimeout, jvms: map[int]*jvmState{}}
	for _, o := range opts {
		o(p)
	}
	p.loop = periodic.New(p.collect, append(p.loopOpts, periodic.AtStart())...)
	return p
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return Name }

// Tables implements probe.Tables.
func (p *Probe) Tables() []*table.Table {
	return []*table.Table{table.JvmInfo, table.JvmProc, table.JvmClass, table.JvmThread, table.JvmMem, table.JvmMemPool, table.JvmBufPool, table.JvmGc}
}

// Start starts the report loop.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	p.ctx = ctx
	if err := p.loop.Start(cfg, rt); err != nil {
		return fmt.Errorf("jvm: %w", err)
	}
	return nil
}

// Stop closes the JMX connections (the loop has ended). Idempotent.
func (p *Probe) Stop() error {
	for _, j := range p.jvms {
		j.closeJMX()
	}
	return nil
}

// jvmState is what is kept of one JVM between periods.
type jvmState struct {
	startTicks uint64 // /proc/<pid>/stat start time: tells a reused pid
	perfPath   string
	att        *hotspot.Attacher
	attachErr  error // set once attach failed: not retried for this JVM
	props      map[string]string
	flags      map[string]int64
	jmx        jmxState
}

// collect publishes the tables of every observed JVM.
func (p *Probe) collect(c periodic.Cycle) {
	pids, err := p.fs.PIDs()
	if err != nil {
		c.RT.Error()
		c.WarnOnce("pids", "jvm: cannot list processes", "err", err)
		return
	}
	seen := map[int]bool{}
	for _, pid := range pids {
		if t := c.Config.Targets; t != nil && !t.Observed(pid) {
			continue
		}
		j, err := p.jvm(pid)
		if err != nil {
			if !gone(err) {
				c.RT.Error()
				c.WarnOnce("read", "jvm: cannot read a process (logged once)", "pid", pid, "err", err)
			}
			continue
		}
		if j == nil {
			continue
		}
		seen[pid] = true
		p.report(c, pid, j)
	}
	for pid, j := range p.jvms {
		if !seen[pid] {
			j.closeJMX()
			delete(p.jvms, pid)
		}
	}
}

// jvm returns the state of pid if it is a JVM with hsperfdata, nil if it
// is not one.
func (p *Probe) jvm(pid int) (*jvmState, error) {
	st, err := p.fs.PIDStat(pid)
	if err != nil {
		return nil, err
	}
	if j := p.jvms[pid]; j != nil && j.startTicks == st.StartTime {
		return j, nil
	} else if j != nil {
		j.closeJMX()
	}
	delete(p.jvms, pid)
	status, err := p.fs.PIDStatus(pid)
	if err != nil {
		return nil, err
	}
	nspid := pid
	if n := len(status.NStgid); n > 0 {
		nspid = status.NStgid[n-1]
	}
	proc := p.fs.Path(fmt.Sprintf("/proc/%d", pid))
	perfPath := hotspot.FindPerfData(proc, nspid)
	if perfPath == "" {
		return nil, nil
	}
	j := &jvmState{startTicks: st.StartTime, perfPath: perfPath,
		att: &hotspot.Attacher{Proc: proc, PID: pid, NSPID: nspid, Timeout: p.attachTimeout},
		jmx: jmxState{noColl: map[string]bool{}}}
	p.jvms[pid] = j
	return j, nil
}

// gone says err is that of a process (or JVM) that exited meanwhile.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// jcmd runs a command on j unless attach failed before; the first
// failure is logged.
func (p *Probe) jcmd(c periodic.Cycle, pid int, j *jvmState, command string) (string, bool) {
	if j.attachErr != nil {
		return "", false
	}
	out, err := j.att.Jcmd(p.ctx, command)
	if err != nil {
		if p.ctx.Err() != nil {
			return "", false
		}
		if errors.Is(err, hotspot.ErrNoAttach) { // a JVM's setting, not a failure
			noAttach(c, pid, j, err)
			return "", false
		}
		c.RT.Error()
		c.WarnOnce("jcmd."+command, "jvm: diagnostic command failed (logged once per command)", "pid", pid, "command", command, "err", err)
		return "", false
	}
	return out, true
}

// noAttach gives up attaching to j, saying so once: a JVM that will not
// listen is not signalled again every period.
func noAttach(c periodic.Cycle, pid int, j *jvmState, err error) {
	j.attachErr = err
	c.RT.Logger().Warn("jvm: attach unavailable: heap from hsperfdata; no code cache pools, threads_deadlocked, runtime, "+
		"jvm_buf_pool and jvm_mem_pool coll_* (unless the JVM runs its management agent already) for this JVM",
		"pid", pid, "err", err)
}

// report publishes one JVM's records.
func (p *Probe) report(c periodic.Cycle, pid int, j *jvmState) {
	pd, err := hotspot.ReadPerfData(j.perfPath)
	if err != nil {
		if !gone(err) {
			c.RT.Error()
			c.WarnOnce("perf."+strconv.Itoa(pid), "jvm: unreadable hsperfdata", "pid", pid, "err", err)
		}
		return
	}
	if !pd.Started() {
		return // still starting: not attached to before it can answer
	}
	if j.attachErr == nil && !pd.AttachEnabled() {
		noAttach(c, pid, j, fmt.Errorf("%w: pid %d has attach disabled (hsperfdata sun.rt.jvmCapabilities)", hotspot.ErrNoAttach, pid))
	}
	if j.props == nil {
		if out, ok := p.jcmd(c, pid, j, "VM.system_properties"); ok {
			j.props = parseProperties(out)
		}
	}
	if j.flags == nil {
		if out, ok := p.jcmd(c, pid, j, "VM.flags"); ok {
			j.flags = parseFlags(out)
		}
	}
	s := snapshot{pd: pd, props: j.props, flags: j.flags, deadlocked: -1}
	if out, ok := p.jcmd(c, pid, j, "GC.heap_info"); ok {
		h := parseHeapInfo(out)
		s.heapInfo = &h
	}
	if out, ok := p.jcmd(c, pid, j, "Compiler.codecache"); ok {
		s.code = parseCodeCache(out)
	}
	if out, ok := p.jcmd(c, pid, j, "Thread.print"); ok {
		s.deadlocked = deadlocked(out)
	}
	if st, err := p.fs.PIDStat(pid); err == nil {
		s.cpuSecs = float64(st.UTime+st.STime) / procfs.UserHZ
	} else {
		s.cpuSecs = -1
	}
	recs := s.records(pid, c.Now, c.Period)
	if s.mbeans = p.readMBeans(c, pid, j, pd, memPoolNames(recs)); s.mbeans != nil {
		recs = s.records(pid, c.Now, c.Period)
	}
	for _, r := range recs {
		c.RT.Record(r)
	}
}

// mainClass is the name label: the main class (or jar) of the command.
func mainClass(pd *hotspot.PerfData) string {
	cmd := strings.Fields(pd.Strings["sun.rt.javaCommand"])
	if len(cmd) == 0 {
		return ""
	}
	return cmd[0]
}
