package flamegraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/symtab"
)

// JIT frames of HotSpot JVMs. Compiled Java methods live in the JVM's
// code cache, anonymous memory no ELF file describes; the JVM names them
// in a perf map (/tmp/perf-<nspid>.map in its mount namespace) when asked
// with the diagnostic command Compiler.perfmap (JDK 17+), sent over the
// attach protocol (package hotspot). No agent is loaded into the JVM.
const (
	// jitAttachTimeout bounds each attach step (listener start, the
	// command: writing the map takes about a second on a small JVM).
	jitAttachTimeout = 10 * time.Second
	// jitRefreshGap is the least time between two requests to one JVM:
	// the command walks the whole code cache at a safepoint.
	jitRefreshGap = 30 * time.Second
	// jitMissThreshold unnamed frames of a JVM since its last request
	// ask for a new map (code compiled since).
	jitMissThreshold = 16
	// jitRecheck is when a JVM found starting is looked at again.
	jitRecheck = time.Second
)

// jitSyms names the JIT frames of the observed JVMs.
type jitSyms struct {
	procRoot string
	fs       procfs.FS // the host, for /proc/<pid>/status
	log      *slog.Logger
	rt       probe.Runtime
	gap      time.Duration
	now      func() time.Time

	reqs chan jitRequest // to run, one at a time

	mu    sync.Mutex
	procs map[int]*jitProc
}

// jitRequest asks one JVM for its perf map.
type jitRequest struct {
	pid     int
	jp      *jitProc
	att     *hotspot.Attacher
	mapPath string
}

// jitQueue bounds the requests waiting: one more JVM is asked at its next
// unnamed frame.
const jitQueue = 64

// jitProc is one process as jitSyms knows it.
type jitProc struct {
	java     bool // a JVM with hsperfdata
	skipped  bool // attach not possible: said once, not tried again
	nspid    int  // its pid in its own namespace
	pm       *symtab.PerfMap
	lastReq  time.Time
	inflight bool
	misses   int       // frames unnamed since the last request
	recheck  time.Time // a JVM still starting: looked at again from then
}

func newJITSyms(hostRoot string, rt probe.Runtime, now func() time.Time) *jitSyms {
	fs := procfs.FS{Root: hostRoot}
	return &jitSyms{procRoot: fs.Path("/proc"), fs: fs, log: rt.Logger(), rt: rt, gap: jitRefreshGap, now: now,
		reqs: make(chan jitRequest, jitQueue), procs: map[int]*jitProc{}}
}

// lookup names pc of pid from its perf map. A JVM seen for the first
// time is asked for its map; one whose unnamed frames keep coming is
// asked again, at most every gap.
func (j *jitSyms) lookup(pid int, pc uint64) (string, bool) {
	if j == nil {
		return "", false // not started
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	jp := j.procLocked(pid)
	if !jp.java || jp.skipped {
		return "", false
	}
	if jp.pm != nil {
		if name, ok := jp.pm.Lookup(pc); ok {
			return name, true
		}
	}
	jp.misses++
	if !jp.inflight && (jp.lastReq.IsZero() || jp.misses >= jitMissThreshold && j.now().Sub(jp.lastReq) >= j.gap) {
		j.request(pid, jp)
	}
	return "", false
}

// isJava tells whether pid is a HotSpot JVM (an hsperfdata file).
func (j *jitSyms) isJava(pid int) bool {
	if j == nil {
		return false // not started
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.procLocked(pid).java
}

// procLocked is what is known of pid, identified on first sight and
// again once its recheck time has come. Called with mu held.
func (j *jitSyms) procLocked(pid int) *jitProc {
	jp := j.procs[pid]
	if jp == nil || !jp.recheck.IsZero() && !j.now().Before(jp.recheck) {
		jp = j.identify(pid)
		j.procs[pid] = jp
	}
	return jp
}

// identify tells whether pid is a JVM (it has hsperfdata) that may be
// attached to. One that has not finished starting is looked at again
// after jitRecheck.
func (j *jitSyms) identify(pid int) *jitProc {
	proc := filepath.Join(j.procRoot, strconv.Itoa(pid))
	st, err := j.fs.PIDStatus(pid)
	if err != nil {
		return &jitProc{} // gone, or not readable: not a JVM to us
	}
	nspid := pid
	if n := len(st.NStgid); n > 0 {
		nspid = st.NStgid[n-1]
	}
	path := hotspot.FindPerfData(proc, nspid)
	if path == "" {
		return &jitProc{} // not a JVM, or one run with -XX:-UsePerfData
	}
	jp := &jitProc{java: true, nspid: nspid}
	pd, err := hotspot.ReadPerfData(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return &jitProc{}
		}
		return &jitProc{recheck: j.now().Add(jitRecheck)} // being written
	}
	if !pd.Started() {
		return &jitProc{recheck: j.now().Add(jitRecheck)}
	}
	if !pd.AttachEnabled() {
		j.skip(pid, jp, fmt.Errorf("%w: attach disabled (-XX:+DisableAttachMechanism)", hotspot.ErrNoAttach))
	}
	return jp
}

func (j *jitSyms) skip(pid int, jp *jitProc, err error) {
	jp.skipped = true
	j.log.Info("flamegraph: JVM not asked for a perf map: its JIT frames stay [unknown]", "pid", pid, "err", err)
}

// request queues a Compiler.perfmap for pid (called with j.mu held).
func (j *jitSyms) request(pid int, jp *jitProc) {
	proc := filepath.Join(j.procRoot, strconv.Itoa(pid))
	r := jitRequest{pid: pid, jp: jp,
		att:     &hotspot.Attacher{Proc: proc, PID: pid, NSPID: jp.nspid, Timeout: jitAttachTimeout},
		mapPath: filepath.Join(proc, "root", "tmp", "perf-"+strconv.Itoa(jp.nspid)+".map")}
	select {
	case j.reqs <- r:
		jp.inflight = true
		jp.lastReq = j.now()
		jp.misses = 0
	default: // queue full: asked at a later frame
	}
}

// run serves the requests, one at a time, until ctx ends.
func (j *jitSyms) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-j.reqs:
			j.serve(ctx, r)
		}
	}
}

// serve runs one request and keeps the map the JVM wrote.
func (j *jitSyms) serve(ctx context.Context, r jitRequest) {
	began := time.Now()
	pm, dropped, err := j.fetch(ctx, r.att, r.mapPath)
	j.mu.Lock()
	defer j.mu.Unlock()
	r.jp.inflight = false
	switch {
	case errors.Is(err, hotspot.ErrNoAttach):
		j.skip(r.pid, r.jp, err)
	case err != nil && ctx.Err() == nil && !gone(err):
		j.rt.Error()
		j.log.Warn("flamegraph: JVM perf map failed", "pid", r.pid, "err", err)
	case err == nil:
		r.jp.pm = pm
		j.log.Debug("flamegraph: JVM perf map loaded", "pid", r.pid, "entries", pm.Len(), "took", time.Since(began))
		if dropped > 0 {
			// Beyond the bound: those methods stay [unknown].
			j.rt.Lost(uint64(dropped))
			j.log.Warn("flamegraph: JVM perf map truncated", "pid", r.pid, "kept", pm.Len(), "dropped", dropped)
		}
	}
}

func (j *jitSyms) fetch(ctx context.Context, att *hotspot.Attacher, mapPath string) (*symtab.PerfMap, int, error) {
	if _, err := att.Jcmd(ctx, "Compiler.perfmap"); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(mapPath)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	pm, dropped, err := symtab.ParsePerfMap(f, symtab.MaxPerfMapEntries)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", mapPath, err)
	}
	return pm, dropped, nil
}

// forget drops an exited process.
func (j *jitSyms) forget(pid int) {
	if j == nil {
		return
	}
	j.mu.Lock()
	delete(j.procs, pid)
	j.mu.Unlock()
}

// gone says err is that of a process that exited meanwhile.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ECONNREFUSED)
}

// loaded says whether pid's perf map is loaded (tests).
func (j *jitSyms) loaded(pid int) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	jp := j.procs[pid]
	return jp != nil && jp.pm != nil
}
