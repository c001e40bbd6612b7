package custom

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// ConfigEnv is the environment variable that carries a probe's initial
// configuration.
const ConfigEnv = "GALAGO_PROBE_CONFIG"

const (
	// defaultStopGrace is how long a probe has to exit after SIGINT.
	defaultStopGrace = 5 * time.Second
	// killWait bounds the wait for a SIGKILLed probe (a process stuck in
	// uninterruptible sleep outlives it).
	killWait = 5 * time.Second
	// drainAfterExit is how long the reader keeps reading after the probe
	// exited, for output still held open by processes it left behind.
	drainAfterExit = 500 * time.Millisecond
	// stdinTimeout bounds the write of one configuration line.
	stdinTimeout = time.Second
)

// Probe runs one custom probe's executable and turns its output into
// records, events and log lines.
type Probe struct {
	feat   *probe.Feature
	tables map[string]*table.Table
	list   []*table.Table
	// checkBin vets the executable before every start, as LoadDecls did:
	// it may have been replaced since.
	checkBin  func(path string) error
	stopGrace time.Duration

	period atomic.Int64 // report period (ns) for new records
	wake   chan struct{}

	mu  sync.Mutex // guards cfg and run
	cfg probe.Config
	run *child
}

// child is one started executable.
type child struct {
	cmd    *exec.Cmd
	pid    int // also its process group id
	stdout *os.File
	stdin  *os.File
	stderr *lineLogger
	exited chan struct{}
	err    error // Wait's result, set before exited is closed
	// dirty is set when a configuration line was written only in part: the
	// next one starts with a newline so the partial one stays one bad line.
	dirty bool
}

// New returns a probe that runs feat's executable and reads the tables of
// its .meta. It is cheap: nothing runs before Start.
func New(feat *probe.Feature, tables []*table.Table) probe.Probe {
	p := &Probe{
		feat:      feat,
		tables:    make(map[string]*table.Table, len(tables)),
		list:      tables,
		checkBin:  rootOnly.checkBinFile,
		stopGrace: defaultStopGrace,
		wake:      make(chan struct{}, 1),
	}
	for _, t := range tables {
		p.tables[t.Name] = t
	}
	return p
}

// Factory loads feat's .meta and returns the factory to give
// probe.Manager.AddCustom.
func Factory(feat *probe.Feature) (probe.Factory, error) {
	tables, err := LoadMeta(feat)
	if err != nil {
		return nil, err
	}
	return func() probe.Probe { return New(feat, tables) }, nil
}

// Name implements probe.Probe.
func (p *Probe) Name() string { return p.feat.Name }

// Tables implements probe.Tables: the tables of the probe's .meta.
func (p *Probe) Tables() []*table.Table { return p.list }

// Start runs the executable in its own process group and starts reading its
// output.
func (p *Probe) Start(ctx context.Context, cfg probe.Config, rt probe.Runtime) error {
	bin := p.feat.Custom.Bin
	if err := p.checkBin(bin); err != nil {
		return fmt.Errorf("custom probe %s: refusing to run %w", p.feat.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil {
		return fmt.Errorf("custom probe %s is already running", p.feat.Name)
	}
	conf, err := encodeConfig(p.feat, cfg)
	if err != nil {
		return err
	}
	c, err := startChild(bin, conf, rt.Logger())
	if err != nil {
		return fmt.Errorf("custom probe %s: %w", p.feat.Name, err)
	}
	p.cfg = cfg
	p.period.Store(int64(cfg.Params.Period()))
	p.run = c
	rt.Logger().Info("custom probe started", "bin", bin, "pid", c.pid)
	rt.Go(func(ctx context.Context) error { return p.read(ctx, c, rt) })
	rt.Go(func(ctx context.Context) error { return p.watchTargets(ctx, rt) })
	return nil
}

func startChild(bin string, conf []byte, log *slog.Logger) (*child, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	c := &child{stdout: outR, stdin: inW, exited: make(chan struct{}),
		stderr: &lineLogger{log: log, stream: "stderr"}}
	c.cmd = &exec.Cmd{
		Path:   bin,
		Args:   []string{bin},
		Env:    append(os.Environ(), ConfigEnv+"="+string(conf)),
		Stdin:  inR,
		Stdout: outW,
		Stderr: c.stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid: true,
			// A probe must not outlive galago (a new galago would start a
			// second copy). The signal follows the forking thread, which Go
			// only ends when a goroutine exits locked to it: then the probe
			// dies and is restarted like any probe that dies.
			Pdeathsig: syscall.SIGKILL,
		},
		// Processes the probe leaves behind holding stderr open must not
		// keep Wait from returning.
		WaitDelay: time.Second,
	}
	err = c.cmd.Start()
	// The child has its copies; ours would keep the pipes from reporting EOF.
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, err
	}
	c.pid = c.cmd.Process.Pid
	go func() {
		c.err = c.cmd.Wait()
		c.stderr.flush()
		close(c.exited)
	}()
	return c, nil
}

// read turns the probe's stdout into records, events and log lines until
// the probe exits (an error, so the Manager restarts it) or ctx is done.
func (p *Probe) read(ctx context.Context, c *child, rt probe.Runtime) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		// Unblock the reader: at once when stopping; after a short drain
		// when the probe exited.
		select {
		case <-ctx.Done():
			_ = c.stdout.SetReadDeadline(time.Now())
		case <-c.exited:
			_ = c.stdout.SetReadDeadline(time.Now().Add(drainAfterExit))
		case <-done:
		}
	}()
	r := &reader{p: p, rt: rt, log: rt.Logger(), warned: map[error]bool{}}
	r.consume(c.stdout)
	select {
	case <-ctx.Done():
		return nil
	case <-c.exited:
	}
	if c.err != nil {
		return fmt.Errorf("custom probe %s (pid %d) exited: %w", p.feat.Name, c.pid, c.err)
	}
	return fmt.Errorf("custom probe %s (pid %d) exited with status 0", p.feat.Name, c.pid)
}

// watchTargets sends the configuration again when the observed processes
// change, as gala-gopher re-sends its IPC message.
func (p *Probe) watchTargets(ctx context.Context, rt probe.Runtime) error {
	for {
		p.mu.Lock()
		tg := p.cfg.Targets
		p.mu.Unlock()
		var changed <-chan struct{}
		if tg != nil {
			changed = tg.Changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake: // the configuration (and maybe the targets) changed
		case <-changed:
			p.mu.Lock()
			err := p.sendLocked()
			p.mu.Unlock()
			if err != nil {
				probe.LogError(rt, "custom probe: sending the new process set failed", err)
			}
		}
	}
}

// Reconfigure implements probe.Reconfigurer: the new configuration is
// written as one JSON line to the probe's stdin.
func (p *Probe) Reconfigure(cfg probe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.cfg
	p.cfg = cfg
	// Before the write: the probe may answer with records at once.
	p.period.Store(int64(cfg.Params.Period()))
	if err := p.sendLocked(); err != nil {
		p.cfg = old
		p.period.Store(int64(old.Params.Period()))
		return err
	}
	probe.Kick(p.wake)
	return nil
}

// sendLocked writes the current configuration to the probe's stdin. Called
// with p.mu held.
func (p *Probe) sendLocked() error {
	c := p.run
	if c == nil {
		return fmt.Errorf("custom probe %s is not running", p.feat.Name)
	}
	conf, err := encodeConfig(p.feat, p.cfg)
	if err != nil {
		return err
	}
	line := append(conf, '\n')
	if c.dirty {
		line = append([]byte{'\n'}, line...)
	}
	if err := c.stdin.SetWriteDeadline(time.Now().Add(stdinTimeout)); err != nil {
		return err
	}
	n, err := c.stdin.Write(line)
	if err != nil {
		if n > 0 {
			c.dirty = true
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("custom probe %s does not read its stdin: %w", p.feat.Name, err)
		}
		return fmt.Errorf("custom probe %s: writing its stdin: %w", p.feat.Name, err)
	}
	c.dirty = false
	return nil
}

// Stop implements probe.Probe: SIGINT to the probe's process group, SIGKILL
// to what is left of it when the probe has exited or after the grace period,
// and the probe is reaped. Idempotent.
func (p *Probe) Stop() error {
	p.mu.Lock()
	c := p.run
	p.run = nil
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.stop(p.stopGrace)
}

func (c *child) stop(grace time.Duration) error {
	// Keep reading, so that a probe blocked writing a full pipe can see
	// its signal.
	_ = c.stdout.SetReadDeadline(time.Time{})
	drained := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c.stdout)
		close(drained)
	}()
	// The group id is the probe's pid: while the probe or anything of its
	// group lives, the id cannot be reused.
	_ = syscall.Kill(-c.pid, syscall.SIGINT)
	timer := time.NewTimer(grace)
	select {
	case <-c.exited:
	case <-timer.C:
	}
	timer.Stop()
	// The probe itself if it ignored SIGINT, and whatever it started.
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	var err error
	select {
	case <-c.exited:
	case <-time.After(killWait):
		err = fmt.Errorf("pid %d did not exit after SIGKILL", c.pid)
	}
	c.stdout.Close() // a process outside the group may still hold the pipe
	<-drained
	c.stdin.Close()
	return err
}

// reader is one run's stdout parser state.
type reader struct {
	p      *Probe
	rt     probe.Runtime
	log    *slog.Logger
	warned map[error]bool
}

// consume reads lines until EOF or a read deadline.
func (r *reader) consume(f io.Reader) {
	// One byte more than the longest line with its newline, and one for a
	// '\r': longer lines fill the buffer.
	br := bufio.NewReaderSize(f, maxLineLen+2)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			r.drop(errTooLong, errTooLong, line)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		if err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				r.drop(errUnterminated, errUnterminated, line)
			}
			return
		}
		r.handle(line[:len(line)-1], time.Now())
	}
}

func (r *reader) handle(line []byte, now time.Time) {
	if len(bytes.TrimSuffix(line, []byte{'\r'})) > maxLineLen {
		r.drop(errTooLong, errTooLong, line)
		return
	}
	kind, f := parseLine(line)
	switch kind {
	case lineEmpty:
	case lineText:
		if lvl, msg := textLevel(f[0]); msg != "" {
			r.log.Log(context.Background(), lvl, msg, "stream", "stdout")
		}
	case lineTable:
		t := r.p.tables[string(f[0])]
		if t == nil {
			r.drop(errUnknownTable, fmt.Errorf("%w %q", errUnknownTable, f[0]), line)
			return
		}
		rec, err := buildRecord(t, f[1:], now, time.Duration(r.p.period.Load()))
		if err != nil {
			r.drop(reasonOf(err), err, line)
			return
		}
		r.rt.Record(rec)
	case lineEvent:
		e, err := parseEvent(f, now)
		if err != nil {
			r.drop(errBadEvent, err, line)
			return
		}
		r.rt.Event(e)
	case lineLog:
		l, err := event.ParseLog(f)
		if err != nil {
			r.drop(event.ErrBadLog, err, line)
			return
		}
		lr, ok := r.rt.(probe.LogRuntime)
		if !ok {
			r.drop(errNoLogs, errNoLogs, line)
			return
		}
		lr.Log(l)
	}
}

func reasonOf(err error) error {
	for _, reason := range []error{errFieldCount, errEmptyKey, errBadValue} {
		if errors.Is(err, reason) {
			return reason
		}
	}
	return err
}

// drop counts a dropped line; the first drop of each reason is a warning,
// later ones are debug messages.
func (r *reader) drop(reason, err error, line []byte) {
	r.rt.Error()
	lvl := slog.LevelDebug
	if !r.warned[reason] {
		r.warned[reason] = true
		lvl = slog.LevelWarn
	}
	if len(line) > 120 {
		line = line[:120]
	}
	r.log.Log(context.Background(), lvl, "custom probe: line dropped", "reason", err.Error(), "line", string(line))
}

// lineLogger logs what a probe writes to stderr, line by line, at the level
// its prefix says. Only exec's copying goroutine writes to it.
type lineLogger struct {
	log    *slog.Logger
	stream string
	buf    []byte
}

func (w *lineLogger) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.buf = append(w.buf, b...)
			if len(w.buf) > maxLineLen {
				w.flush()
			}
			break
		}
		w.buf = append(w.buf, b[:i]...)
		w.flush()
		b = b[i+1:]
	}
	return n, nil
}

func (w *lineLogger) flush() {
	if len(w.buf) == 0 {
		return
	}
	if lvl, msg := textLevel(w.buf); msg != "" {
		w.log.Log(context.Background(), lvl, msg, "stream", w.stream)
	}
	w.buf = w.buf[:0]
}

// configJSON is what a probe receives (see the package doc).
type configJSON struct {
	Probe     []string   `json:"probe"`
	Params    paramsJSON `json:"params"`
	PIDs      []int      `json:"pids"`
	Blacklist bool       `json:"blacklist,omitempty"`
	CgroupIDs []uint64   `json:"cgroup_ids,omitempty"`
}

type paramsJSON struct {
	ReportPeriod int               `json:"report_period"`
	SamplePeriod int               `json:"sample_period"`
	LatencyThr   int               `json:"latency_thr"`
	OfflineThr   int               `json:"offline_thr"`
	DropsThr     int               `json:"drops_thr"`
	ResLowerThr  int               `json:"res_lower_thr"`
	ResUpperThr  int               `json:"res_upper_thr"`
	ReportEvent  int               `json:"report_event"`
	CustomParam  map[string]string `json:"custom_param"`
}

// encodeConfig renders cfg as the compact JSON a probe receives.
func encodeConfig(feat *probe.Feature, cfg probe.Config) ([]byte, error) {
	pr := cfg.Params
	c := configJSON{
		Probe: feat.SubItemNames(cfg.SubItems),
		Params: paramsJSON{
			ReportPeriod: pr.ReportPeriod, SamplePeriod: pr.SamplePeriod,
			LatencyThr: pr.LatencyThr, OfflineThr: pr.OfflineThr, DropsThr: pr.DropsThr,
			ResLowerThr: pr.ResLowerThr, ResUpperThr: pr.ResUpperThr, ReportEvent: pr.ReportEvent,
			CustomParam: pr.CustomParam,
		},
		PIDs: []int{},
	}
	if c.Params.CustomParam == nil {
		c.Params.CustomParam = map[string]string{}
	}
	if t := cfg.Targets; t != nil {
		c.PIDs = append(c.PIDs, t.PIDs()...)
		slices.Sort(c.PIDs)
		c.Blacklist = t.Mode() == snoop.Blacklist
		c.CgroupIDs = slices.Sorted(slices.Values(t.CgroupIDs()))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("custom probe %s: encoding its configuration: %w", feat.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
