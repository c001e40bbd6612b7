package bench

import (
	"context"

	"github.com/cilium/ebpf"

	"errors"
	"fmt"
	"github.com/galago-project/galago/internal/exetrim"
	"github.com/galago-project/galago/internal/realsrv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is one make bench run.
type Config struct {
	// Galago is the daemon binary.
	Galago string
	// Pairs is the number of rounds: each round runs every arm once.
	Pairs int
	// Duration of each workload run.
	Duration time.Duration
	// BPFDuration is the length of each agent arm's second load, run
	// with the kernel's BPF statistics on (Duration/2 when 0); the first
	// load, the one throughput, latency and agent CPU are read from, runs
	// with them off, as the daemon runs by default.
	BPFDuration time.Duration
	// ReportPeriod is galago's report_period (s) in every probe set.
	ReportPeriod int
	// Settle is the wait between an agent being ready and the load: by
	// default one report period (galago's first period does the start-up
	// walks, baseinfo reads every process) or, when longer, until galago
	// has returned its start-up's executable pages to the kernel
	// (exetrim.DefaultQuiet after its last probe change, and 2 s more),
	// so that RSS is the running agent's.
	Settle time.Duration
	// Workloads and ProbeSets filter the tables by name (nil: all).
	Workloads, ProbeSets []string
	// Peer, when Cmd is set, is measured in every round too.
	Peer PeerConfig
	// Commit names the galago version measured; Quick marks a
	// development run in the results.
	Commit string
	Quick  bool
	// TempDir holds every server's and agent's files (removed at the end).
	TempDir string
	Log     *slog.Logger
	// Progress receives one line per arm.
	Progress io.Writer
	// ProfileDir, when set, receives a Go CPU profile of each galago arm
	// over its load (<workload>-<probe set>-r<round>.pprof), from the
	// daemon's pprof endpoint: where the agent's CPU goes.
	ProfileDir string
	// AllocProfileDir, when set, receives a Go allocation profile of
	// each galago arm over its load (<...>.allocs.pprof): where its
	// garbage comes from.
	AllocProfileDir string
}

// Validate checks the configuration and resolves the filters.
func (c *Config) Validate() ([]Workload, []ProbeSet, error) {
	if c.Pairs < 1 {
		return nil, nil, fmt.Errorf("pairs %d: need at least 1", c.Pairs)
	}
	if c.Duration < time.Second {
		return nil, nil, fmt.Errorf("duration %v: need at least 1s", c.Duration)
	}
	if c.ReportPeriod < 1 {
		return nil, nil, fmt.Errorf("report period %d s: need at least 1", c.ReportPeriod)
	}
	if _, err := os.Stat(c.Galago); err != nil {
		return nil, nil, fmt.Errorf("galago binary: %w (make build)", err)
	}
	wls, err := filter(Workloads, c.Workloads, Workload.Name, "workload")
	if err != nil {
		return nil, nil, err
	}
	sets, err := filter(ProbeSets, c.ProbeSets, func(s ProbeSet) string { return s.Name }, "probe set")
	if err != nil {
		return nil, nil, err
	}
	return wls, sets, nil
}

func filter[T any](all []T, names []string, name func(T) string, what string) ([]T, error) {
	if len(names) == 0 {
		return all, nil
	}
	var known []string
	for _, t := range all {
		known = append(known, name(t))
	}
	var out []T
	for _, n := range names {
		i := slices.Index(known, n)
		if i < 0 {
			return nil, fmt.Errorf("unknown %s %q (known: %s)", what, n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

const bpfStatsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

// Run measures every selected workload with every selected probe set (and
// the peer), interleaved, and returns the results. Every process it
// started is stopped before it returns, also when ctx is cancelled. When a
// workload fails, the report of what was measured until then comes back
// with the error (its Error set).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	wls, sets, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Settle == 0 {
		cfg.Settle = max(time.Duration(cfg.ReportPeriod)*time.Second, exetrim.DefaultQuiet+2*time.Second)
	}
	if cfg.BPFDuration == 0 {
		cfg.BPFDuration = max(time.Second, cfg.Duration/2)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("make bench needs root: galago loads BPF, the harness reads other processes' /proc and sets kernel.bpf_stats_enabled")
	}
	// Readable by the postgres user (its directory is its own, 0700).
	if err := os.Chmod(cfg.TempDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Commit: cfg.Commit, Quick: cfg.Quick, Start: time.Now().UTC(),
		Settings: Settings{Pairs: cfg.Pairs, DurationS: cfg.Duration.Seconds(), BPFDurationS: cfg.BPFDuration.Seconds(), ReportPeriodS: cfg.ReportPeriod,
			SettleS: cfg.Settle.Seconds(), ScrapeEveryS: scrapeEvery(cfg.ReportPeriod).Seconds(), Peer: cfg.Peer.Cmd}}
	if rep.Machine, err = readMachine(); err != nil {
		return nil, err
	}
	// BPF run time is only accounted while the kernel's statistics are
	// on, and they cost every program run two clock reads: off for the
	// loads throughput is read from, on for each agent arm's second load
	// (bpfWindow); restored at the end.
	restore, err := setBPFStats(false)
	if err != nil {
		return nil, err
	}
	defer restore()

	procs := realsrv.NewProcs()
	defer procs.StopAll()
	servers := map[string]realsrv.Server{}
	for _, w := range wls {
		if servers[w.Server()] != nil {
			continue
		}
		dir := filepath.Join(cfg.TempDir, w.Server())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		var s realsrv.Server
		switch w.Server() {
		case "nginx":
			s, err = realsrv.StartNginx(ctx, procs, dir)
		case "redis":
			s, err = realsrv.StartRedis(ctx, procs, dir)
		case "postgres":
			s, err = realsrv.StartPostgres(ctx, procs, dir)
		case "memcached":
			s, err = realsrv.StartMemcached(ctx, procs)
		default:
			err = fmt.Errorf("workload %s: no server %q", w.Name(), w.Server())
		}
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", w.Server(), err)
		}
		servers[w.Server()] = s
	}
	r := &runner{cfg: cfg, procs: procs, sampler: Sampler{ProgName: kernelProgName()}}
	for _, w := range wls {
		res, err := r.workload(ctx, w, servers[w.Server()], sets)
		if err != nil {
			// The arms measured so far stay in the report, for the
			// JSON (not for BENCHMARKS.md: see the command).
			err = fmt.Errorf("workload %s: %w", w.Name(), err)
			res.summarise(sets, r.cfg.Peer.Cmd != "")
			rep.Workloads = append(rep.Workloads, res)
			rep.End, rep.Error = time.Now().UTC(), err.Error()
			rep.Machine.LoadEnd = readLoadavg()
			return rep, err
		}
		rep.Workloads = append(rep.Workloads, res)
	}
	rep.End = time.Now().UTC()
	rep.Machine.LoadEnd = readLoadavg()
	return rep, nil
}

// setBPFStats sets kernel.bpf_stats_enabled and returns what restores
// the previous value.
func setBPFStats(on bool) (func(), error) {
	old, err := os.ReadFile(bpfStatsSysctl)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w (BPF run-time statistics need Linux 5.1+)", bpfStatsSysctl, err)
	}
	v := "0\n"
	if on {
		v = "1\n"
	}
	if err := os.WriteFile(bpfStatsSysctl, []byte(v), 0o644); err != nil {
		return nil, fmt.Errorf("set %s: %w", bpfStatsSysctl, err)
	}
	return func() { _ = os.WriteFile(bpfStatsSysctl, old, 0o644) }, nil
}

func bpfStatsOn() bool {
	b, err := os.ReadFile(bpfStatsSysctl)
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// scrapeEvery is how often an arm scrapes galago: twice per report period,
// so that no period's samples are replaced before one scrape saw them.
func scrapeEvery(reportPeriod int) time.Duration {
	return time.Duration(reportPeriod) * time.Second / 2
}

type runner struct {
	cfg     Config
	procs   *realsrv.Procs
	sampler Sampler
}

// armSpec is one arm of a round.
type armSpec struct {
	kind string // "none", "galago", "peer"
	set  ProbeSet
}

func (a armSpec) label() string {
	switch a.kind {
	case "galago":
		return a.set.Name
	case "peer":
		return "peer"
	}
	return "none"
}

// workload runs the rounds of one workload. Round r runs "none", each probe
// set, then the peer; odd rounds run them in reverse, so that no arm
// always follows the same one and slow drift cancels out.
func (r *runner) workload(ctx context.Context, w Workload, srv realsrv.Server, sets []ProbeSet) (WorkloadResult, error) {
	res := WorkloadResult{Name: w.Name(), Server: srv.Name(), ConnPerRequest: w.ConnPerRequest()}
	dir, err := os.MkdirTemp(r.cfg.TempDir, w.Name()+"-")
	if err != nil {
		return res, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return res, err
	}
	if err := w.Prepare(ctx, srv, dir); err != nil {
		return res, fmt.Errorf("prepare: %w", err)
	}
	res.Describe = w.Describe() // after Prepare: it may name what Prepare calibrated
	arms := []armSpec{{kind: "none"}}
	for _, s := range sets {
		arms = append(arms, armSpec{kind: "galago", set: s})
	}
	if r.cfg.Peer.Cmd != "" {
		arms = append(arms, armSpec{kind: "peer"})
	}
	for round := range r.cfg.Pairs {
		order := slices.Clone(arms)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, a := range order {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			arm, err := r.arm(ctx, w, srv, dir, a, round)
			if err != nil {
				return res, fmt.Errorf("round %d, %s: %w", round+1, a.label(), err)
			}
			fmt.Fprintf(r.cfg.Progress, "%-16s round %d %-12s %s\n", w.Name(), round+1, a.label(), arm.summary())
			res.Arms = append(res.Arms, arm)
		}
	}
	res.summarise(sets, r.cfg.Peer.Cmd != "")
	return res, nil
}

// arm runs one arm: the agent (if any) started and settled, the server's
// counters and the agent's footprint read around the load, then (galago)
// one more report period for the last samples.
func (r *runner) arm(ctx context.Context, w Workload, srv realsrv.Server, dir string, a armSpec, round int) (res ArmResult, err error) {
	res = ArmResult{Round: round + 1, Agent: a.label(), Kind: a.kind, Start: time.Now().UTC()}
	var pid int
	var g *Galago
	var periods *Periods
	stopScrape := func() {}
	switch a.kind {
	case "galago":
		adir, err := os.MkdirTemp(r.cfg.TempDir, "galago-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(adir)
		if g, err = StartGalago(ctx, r.procs, r.cfg.Galago, adir, a.set, r.cfg.ReportPeriod); err != nil {
			return res, err
		}
		defer stopAgent(g.Stop, &err)
		pid = g.Pid()
		res.Probes = a.set.Features()
		periods = NewPeriods(checkFamilies(a.set)...)
		var scrapeErr error
		stopScrape = scrapeLoop(ctx, g, periods, scrapeEvery(r.cfg.ReportPeriod), &scrapeErr)
		defer func() {
			stopScrape() // before reading scrapeErr: the loop writes it
			if scrapeErr != nil && res.Error == "" {
				res.Error = "scrape: " + scrapeErr.Error()
			}
		}()
	case "peer":
		var err error
		p, err := StartPeer(ctx, r.procs, dir, r.cfg.Peer)
		if err != nil {
			return res, err
		}
		defer stopAgent(p.Stop, &err)
		pid = p.Pid()
		if u := r.cfg.Peer.MetricsURL; u != "" {
			stop := pollLoop(ctx, scrapeEvery(r.cfg.ReportPeriod), func() { _, _ = fetch(ctx, u) })
			defer stop()
		}
	}
	if pid != 0 {
		select {
		case <-time.After(r.cfg.Settle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	var selfBefore Exposition
	if g != nil {
		var err error
		if selfBefore, err = g.Scrape(ctx); err != nil {
			return res, err
		}
	}
	before, err := srv.Counters(ctx)
	if err != nil {
		return res, err
	}
	var costBefore CostSample
	if pid != 0 {
		if costBefore, err = r.sampler.Sample(pid); err != nil {
			return res, err
		}
		if err := r.sampler.ResetPeak(costBefore.PIDs); err != nil {
			return res, err
		}
	}
	var allocBefore uint64
	if g != nil {
		if allocBefore, err = g.TotalAlloc(ctx); err != nil {
			return res, fmt.Errorf("go allocations: %w", err)
		}
	}
	profDone := r.profile(ctx, g, w, a, round)
	load, err := w.Run(ctx, srv, dir, r.cfg.Duration)
	if perr := <-profDone; perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return res, err
	}
	res.Load = load
	if pid != 0 {
		after, err := r.sampler.Sample(pid)
		if err != nil {
			return res, err
		}
		c := Diff(costBefore, after)
		res.Cost = &c
	}
	after, err := srv.Counters(ctx)
	if err != nil {
		return res, err
	}
	res.Truth = w.Truth(after.Sub(before))
	if pid == 0 {
		return res, nil
	}
	var bpf Cost
	if res.BPF, bpf, res.BPFStats, err = r.bpfWindow(ctx, w, srv, dir, pid); err != nil {
		return res, fmt.Errorf("BPF statistics load: %w", err)
	}
	if res.Cost != nil {
		res.Cost.BPFSeconds, res.Cost.BPFRuns, res.Cost.IterSeconds, res.Cost.PerProgram = bpf.BPFSeconds, bpf.BPFRuns, bpf.IterSeconds, bpf.PerProgram
	}
	if g == nil {
		return res, nil
	}
	if h, err := g.HeapBytes(ctx); err == nil {
		res.HeapBytes = h
	} else {
		return res, fmt.Errorf("go heap: %w", err)
	}
	if n, err := g.TotalAlloc(ctx); err == nil {
		res.AllocBytes = n - min(n, allocBefore)
	} else {
		return res, fmt.Errorf("go allocations: %w", err)
	}
	// The load's last samples are in the period that ends after it: wait
	// for that report (plus a margin for the probes' own work), scrape
	// once more, then compare.
	select {
	case <-time.After(time.Duration(r.cfg.ReportPeriod)*time.Second + 1500*time.Millisecond):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	stopScrape()
	selfAfter, err := g.Scrape(ctx)
	if err != nil {
		return res, err
	}
	if err := periods.Add(time.Now(), selfAfter); err != nil {
		return res, err
	}
	res.Lost = map[string]float64{}
	lostB, lostA := selfBefore.ByLabel("galago_probe_events_lost_total", "probe"), selfAfter.ByLabel("galago_probe_events_lost_total", "probe")
	for _, f := range a.set.Features() {
		res.Lost[f] = lostA[f] - lostB[f]
	}
	res.Lost["proctrack"] = selfAfter.Sum("galago_proctrack_events_lost_total", nil) - selfBefore.Sum("galago_proctrack_events_lost_total", nil)
	res.RecordsDropped = selfAfter.Sum("galago_records_dropped_total", nil) - selfBefore.Sum("galago_records_dropped_total", nil)
	res.Scrapes = periods.Scrapes()
	res.MaxScrapeGapS = periods.MaxGap().Seconds()
	complete := periods.MaxGap() < time.Duration(r.cfg.ReportPeriod)*time.Second
	// galago saw both loads.
	total := res.Truth.Add(res.BPF.Truth)
	for _, c := range a.set.Checks {
		truth, inFlight, ok := c.Truth(total)
		if !ok {
			continue
		}
		got, n := periods.Total(c.Family, c.matchLabels(srv.Port()))
		res.Accuracy = append(res.Accuracy, CheckResult{Name: c.Name, Truth: truth, InFlight: inFlight, Galago: got, Periods: n, Complete: complete})
	}
	return res, nil
}

// bpfWindow runs the load a second time, for r.cfg.BPFDuration, with the
// kernel's BPF statistics on, and returns that load, the agent's cost over
// it (of which only the BPF run time is used) and whether the statistics
// were still on at its end: the first load ran without them (the daemon's
// default), so that its throughput does not pay their clock reads.
func (r *runner) bpfWindow(ctx context.Context, w Workload, srv realsrv.Server, dir string, pid int) (*BPFWindow, Cost, bool, error) {
	restore, err := setBPFStats(true)
	if err != nil {
		return nil, Cost{}, false, err
	}
	defer restore()
	before, err := srv.Counters(ctx)
	if err != nil {
		return nil, Cost{}, false, err
	}
	cb, err := r.sampler.Sample(pid)
	if err != nil {
		return nil, Cost{}, false, err
	}
	load, err := w.Run(ctx, srv, dir, r.cfg.BPFDuration)
	if err != nil {
		return nil, Cost{}, false, err
	}
	ca, err := r.sampler.Sample(pid)
	if err != nil {
		return nil, Cost{}, false, err
	}
	on := bpfStatsOn()
	after, err := srv.Counters(ctx)
	if err != nil {
		return nil, Cost{}, false, err
	}
	return &BPFWindow{Load: load, Truth: w.Truth(after.Sub(before))}, Diff(cb, ca), on, nil
}

// stopAgent stops an arm's agent; an agent that ignores SIGTERM fails the
// arm (it would distort the next one).
func stopAgent(stop func() error, errp *error) {
	if err := stop(); err != nil && *errp == nil {
		*errp = err
	}
}

// checkFamilies lists the families the set's checks read.
func checkFamilies(s ProbeSet) []string {
	var out []string
	for _, c := range s.Checks {
		if !slices.Contains(out, c.Family) {
			out = append(out, c.Family)
		}
	}
	return out
}

// pollLoop calls fn now and every interval until the returned stop is
// called (idempotent).
func pollLoop(ctx context.Context, every time.Duration, fn func()) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			fn()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// scrapeLoop scrapes g into p every interval until the returned stop is
// called (idempotent); the first error is kept in *errp.
func scrapeLoop(ctx context.Context, g *Galago, p *Periods, every time.Duration, errp *error) func() {
	return pollLoop(ctx, every, func() {
		e, err := g.Scrape(ctx)
		if err == nil {
			err = p.Add(time.Now(), e)
		}
		if err != nil && ctx.Err() == nil && *errp == nil {
			*errp = err
		}
	})
}

// readMachine describes the machine the run is on.
func readMachine() (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), LoadStart: readLoadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb uint64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
					return m, fmt.Errorf("/proc/meminfo MemTotal %q: %w", v, err)
				}
				m.MemBytes = kb * 1024
			}
		}
	}
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return m, err
	}
	m.Kernel = strings.TrimSpace(string(b))
	return m, nil
}

func readLoadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// kernelProgName names BPF programs from the kernel's program info (the
// name the object gave them, truncated to 15 bytes), remembering each id.
func kernelProgName() func(uint32) string {
	names := map[uint32]string{}
	return func(id uint32) string {
		if n, ok := names[id]; ok {
			return n
		}
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if err != nil {
			return "" // unloaded meanwhile: asked again next time
		}
		defer p.Close()
		info, err := p.Info()
		if err != nil {
			return ""
		}
		names[id] = info.Name
		return info.Name
	}
}

// profile fetches a CPU profile of galago over the load into
// cfg.ProfileDir and an allocation profile into cfg.AllocProfileDir
// (nothing without them, or for other arms); the channel gives the
// outcome once the profiles are written.
func (r *runner) profile(ctx context.Context, g *Galago, w Workload, a armSpec, round int) <-chan error {
	done := make(chan error, 1)
	if g == nil {
		done <- nil
		return done
	}
	secs := max(1, int(r.cfg.Duration.Seconds())-1)
	base := fmt.Sprintf("%s-%s-r%d", w.Name(), strings.ReplaceAll(a.set.Name, "+", "_"), round+1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct {
		dir, kind, suffix string
		get               func(context.Context, int) ([]byte, error)
	}{{r.cfg.ProfileDir, "cpu", ".pprof", g.CPUProfile}, {r.cfg.AllocProfileDir, "alloc", ".allocs.pprof", g.AllocProfile}} {
		if p.dir == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := p.get(ctx, secs)
			if err == nil {
				err = os.MkdirAll(p.dir, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(p.dir, base+p.suffix), b, 0o644)
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s profile: %w", p.kind, err)
			}
		}()
	}
	go func() {
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	return done
}
