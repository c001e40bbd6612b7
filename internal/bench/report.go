package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is one make bench run: every raw figure (JSON, for comparing
// commits) and the summaries BENCHMARKS.md shows.
type Report struct {
	Commit    string           `json:"commit"`
	Quick     bool             `json:"quick"`
	Start     time.Time        `json:"start"`
	End       time.Time        `json:"end"`
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Workloads []WorkloadResult `json:"workloads"`
	// Error is why the run stopped early; the figures are partial.
	Error string `json:"error,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemBytes uint64 `json:"mem_bytes"`
	Kernel   string `json:"kernel"`
	// Load averages (1, 5, 15 min) at the start and end: other work on
	// the machine makes every figure noisier.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// Settings are the run's parameters.
type Settings struct {
	Pairs         int     `json:"pairs"`
	DurationS     float64 `json:"duration_s"`
	BPFDurationS  float64 `json:"bpf_duration_s,omitempty"`
	ReportPeriodS int     `json:"report_period_s"`
	SettleS       float64 `json:"settle_s"`
	ScrapeEveryS  float64 `json:"scrape_every_s"`
	Peer          string  `json:"peer_cmd,omitempty"`
}

// WorkloadResult is every arm of one workload and their summaries.
type WorkloadResult struct {
	Name           string       `json:"name"`
	Describe       string       `json:"describe"`
	Server         string       `json:"server"`
	ConnPerRequest bool         `json:"conn_per_request"`
	Arms           []ArmResult  `json:"arms"`
	Summaries      []SetSummary `json:"summaries"`
}

// ArmResult is one run of the workload under one agent (or none).
type ArmResult struct {
	Round  int                `json:"round"`
	Agent  string             `json:"agent"` // "none", a probe set name, "peer"
	Kind   string             `json:"kind"`  // "none", "galago", "peer"
	Probes []string           `json:"probes,omitempty"`
	Start  time.Time          `json:"start"`
	Load   realsrv.LoadResult `json:"load"`
	// Truth is the server's own counters over the load.
	Truth realsrv.Counters `json:"truth"`
	// Cost is the agent's footprint over the load (nil without agent);
	// its BPF run time (BPFSeconds, BPFRuns, IterSeconds, PerProgram) is
	// over the second load, BPF.
	Cost *Cost `json:"cost,omitempty"`
	// BPF is the agent arm's second load, with the kernel's BPF
	// statistics on (nil for the no-agent arm).
	BPF *BPFWindow `json:"bpf_window,omitempty"`
	// BPFStats: kernel.bpf_stats_enabled was on at the end of BPF's load.
	BPFStats  bool   `json:"bpf_stats"`
	HeapBytes uint64 `json:"heap_bytes,omitempty"`
	// AllocBytes is what galago's Go code allocated over the load
	// (TotalAlloc's growth): the garbage its GC has to collect.
	AllocBytes uint64 `json:"alloc_bytes,omitempty"`
	// Lost is galago_probe_events_lost_total's growth per probe over the
	// arm (and proctrack's), RecordsDropped galago_records_dropped_total's.
	Lost           map[string]float64 `json:"lost,omitempty"`
	RecordsDropped float64            `json:"records_dropped,omitempty"`
	Accuracy       []CheckResult      `json:"accuracy,omitempty"`
	Scrapes        int                `json:"scrapes,omitempty"`
	MaxScrapeGapS  float64            `json:"max_scrape_gap_s,omitempty"`
	Error          string             `json:"error,omitempty"`
}

// BPFWindow is an agent arm's second run of the load, with the kernel's
// BPF statistics on: the arm's BPF run time (in its Cost) is over this
// load, so per request and per connection it is divided by these. The
// first run, without statistics, gives throughput, latency and the
// agent's CPU: the statistics add two clock reads to every program run,
// which the daemon does not pay by default.
type BPFWindow struct {
	Load  realsrv.LoadResult `json:"load"`
	Truth realsrv.Counters   `json:"truth"`
}

// CheckResult is one accuracy check of one arm.
type CheckResult struct {
	Name  string  `json:"name"`
	Truth float64 `json:"truth"`
	// InFlight: galago may be lower than Truth by at most this, the
	// answers in flight when the load generator stopped.
	InFlight float64 `json:"in_flight,omitempty"`
	Galago   float64 `json:"galago"`
	Periods  int     `json:"periods"`
	// Complete is false when a gap between scrapes exceeded a report
	// period: a period's samples may have been missed.
	Complete bool `json:"complete"`
}

func (a ArmResult) summary() string {
	s := fmt.Sprintf("%10.0f req/s", a.Load.Throughput)
	if a.Load.HasP99 {
		s += fmt.Sprintf("  p99 %7.2f ms", a.Load.P99Ms)
	}
	if a.Cost != nil {
		s += fmt.Sprintf("  cpu %.2f s  bpf %.2f s  rss %.1f MiB (peak %.1f)", a.Cost.CPUSeconds, a.Cost.BPFSeconds, mib(a.Cost.RSSBytes), mib(a.Cost.HWMBytes))
	}
	if a.AllocBytes > 0 {
		s += fmt.Sprintf("  go alloc %.1f MiB", mib(a.AllocBytes))
	}
	for _, c := range a.Accuracy {
		if c.Galago != c.Truth && !(c.Galago < c.Truth && c.Truth-c.Galago <= c.InFlight) {
			s += fmt.Sprintf("  [%s: %.0f vs %.0f]", c.Name, c.Galago, c.Truth)
		}
	}
	return s
}

// Pair is one round's arm against the round's no-agent arm.
type Pair struct {
	Round         int     `json:"round"`
	Off           float64 `json:"off"`
	On            float64 `json:"on"`
	Ratio         float64 `json:"ratio"`
	P99OffMs      float64 `json:"p99_off_ms"`
	P99OnMs       float64 `json:"p99_on_ms"`
	CPUPerReqUs   float64 `json:"cpu_per_req_us"`
	BPFPerReqUs   float64 `json:"bpf_per_req_us"`
	CPUPerConnUs  float64 `json:"cpu_per_conn_us"`
	BPFPerConnUs  float64 `json:"bpf_per_conn_us"`
	Conns         float64 `json:"conns"`
	RSSBytes      uint64  `json:"rss_bytes"`
	HeapBytes     uint64  `json:"heap_bytes"`
	MapBytes      uint64  `json:"map_bytes"`
	BPFStats      bool    `json:"bpf_stats"`
	HasCost       bool    `json:"has_cost"`
	ThroughputErr bool    `json:"load_errors"`
}

// SetSummary is one agent's pairs and their medians.
type SetSummary struct {
	Agent  string   `json:"agent"`
	Probes []string `json:"probes,omitempty"`
	Pairs  []Pair   `json:"pairs"`
	// Medians over the pairs.
	RatioMedian  float64 `json:"ratio_median"`
	OffMedian    float64 `json:"off_median"`
	OnMedian     float64 `json:"on_median"`
	P99Off       float64 `json:"p99_off_ms_median"`
	P99On        float64 `json:"p99_on_ms_median"`
	HasP99       bool    `json:"has_p99"`
	CPUPerReqUs  float64 `json:"cpu_per_req_us_median"`
	BPFPerReqUs  float64 `json:"bpf_per_req_us_median"`
	CPUPerConnUs float64 `json:"cpu_per_conn_us_median"`
	BPFPerConnUs float64 `json:"bpf_per_conn_us_median"`
	ConnsMedian  float64 `json:"conns_median"`
	// Largest over the arms.
	RSSBytes  uint64 `json:"rss_bytes_max"`
	HeapBytes uint64 `json:"heap_bytes_max"`
	MapBytes  uint64 `json:"map_bytes_max"`
	// Summed over the arms.
	Lost           map[string]float64 `json:"lost,omitempty"`
	RecordsDropped float64            `json:"records_dropped"`
	Accuracy       []CheckSummary     `json:"accuracy,omitempty"`
	HasCost        bool               `json:"has_cost"`
	BPFStats       bool               `json:"bpf_stats"`
}

// CheckSummary is one check over every arm of an agent.
type CheckSummary struct {
	Name   string  `json:"name"`
	Truth  float64 `json:"truth"`
	Galago float64 `json:"galago"`
	Exact  int     `json:"exact_arms"`
	// InFlight counts the other arms where galago was lower by no more
	// than the answers in flight at the load generator's stop.
	InFlight int `json:"in_flight_arms"`
	Arms     int `json:"arms"`
	// Worst is the arm difference (galago − truth) largest in size.
	Worst    float64 `json:"worst_diff"`
	Complete bool    `json:"complete"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// summarise pairs every agent arm with the no-agent arm of its round.
func (w *WorkloadResult) summarise(sets []ProbeSet, peer bool) {
	none := map[int]ArmResult{}
	for _, a := range w.Arms {
		if a.Kind == "none" {
			none[a.Round] = a
		}
	}
	agents := []string{}
	probes := map[string][]string{}
	for _, s := range sets {
		agents = append(agents, s.Name)
		probes[s.Name] = s.Features()
	}
	if peer {
		agents = append(agents, "peer")
	}
	w.Summaries = nil
	for _, agent := range agents {
		s := SetSummary{Agent: agent, Probes: probes[agent], Lost: map[string]float64{}, HasCost: true, BPFStats: true}
		acc := map[string]*CheckSummary{}
		var accOrder []string
		for _, a := range w.Arms {
			if a.Agent != agent {
				continue
			}
			off, ok := none[a.Round]
			if !ok {
				continue
			}
			p := Pair{Round: a.Round, Off: off.Load.Throughput, On: a.Load.Throughput, P99OffMs: off.Load.P99Ms, P99OnMs: a.Load.P99Ms,
				Conns: float64(a.Truth.Conns), HeapBytes: a.HeapBytes, BPFStats: a.BPFStats,
				ThroughputErr: a.Load.Errors > 0 || off.Load.Errors > 0}
			if off.Load.Throughput > 0 {
				p.Ratio = a.Load.Throughput / off.Load.Throughput
			}
			if c := a.Cost; c != nil {
				p.HasCost = true
				p.RSSBytes, p.MapBytes = c.RSSBytes, c.MapBytes
				// BPF time over the load with statistics on.
				bpfReqs, bpfConns := a.Load.Requests, a.Truth.Conns
				if b := a.BPF; b != nil {
					bpfReqs, bpfConns = b.Load.Requests, b.Truth.Conns
				}
				if a.Load.Requests > 0 {
					p.CPUPerReqUs = c.CPUSeconds / a.Load.Requests * 1e6
				}
				if bpfReqs > 0 {
					p.BPFPerReqUs = c.BPFSeconds / bpfReqs * 1e6
				}
				if a.Truth.Conns > 0 {
					p.CPUPerConnUs = c.CPUSeconds / float64(a.Truth.Conns) * 1e6
				}
				if bpfConns > 0 {
					p.BPFPerConnUs = c.BPFSeconds / float64(bpfConns) * 1e6
				}
			}
			s.HasCost = s.HasCost && p.HasCost
			s.BPFStats = s.BPFStats && p.BPFStats
			s.Pairs = append(s.Pairs, p)
			s.RSSBytes = max(s.RSSBytes, p.RSSBytes)
			s.HeapBytes = max(s.HeapBytes, p.HeapBytes)
			s.MapBytes = max(s.MapBytes, p.MapBytes)
			for k, v := range a.Lost {
				s.Lost[k] += v
			}
			s.RecordsDropped += a.RecordsDropped
			for _, c := range a.Accuracy {
				cs := acc[c.Name]
				if cs == nil {
					cs = &CheckSummary{Name: c.Name, Complete: true}
					acc[c.Name] = cs
					accOrder = append(accOrder, c.Name)
				}
				cs.Arms++
				cs.Truth += c.Truth
				cs.Galago += c.Galago
				d := c.Galago - c.Truth
				switch {
				case d == 0:
					cs.Exact++
				case d < 0 && -d <= c.InFlight:
					cs.InFlight++
				default:
					if math.Abs(d) > math.Abs(cs.Worst) {
						cs.Worst = d
					}
				}
				cs.Complete = cs.Complete && c.Complete
			}
		}
		if len(s.Pairs) == 0 {
			continue
		}
		col := func(f func(Pair) float64) float64 {
			v := make([]float64, len(s.Pairs))
			for i, p := range s.Pairs {
				v[i] = f(p)
			}
			return median(v)
		}
		s.RatioMedian = col(func(p Pair) float64 { return p.Ratio })
		s.OffMedian = col(func(p Pair) float64 { return p.Off })
		s.OnMedian = col(func(p Pair) float64 { return p.On })
		s.P99Off = col(func(p Pair) float64 { return p.P99OffMs })
		s.P99On = col(func(p Pair) float64 { return p.P99OnMs })
		s.CPUPerReqUs = col(func(p Pair) float64 { return p.CPUPerReqUs })
		s.BPFPerReqUs = col(func(p Pair) float64 { return p.BPFPerReqUs })
		s.CPUPerConnUs = col(func(p Pair) float64 { return p.CPUPerConnUs })
		s.BPFPerConnUs = col(func(p Pair) float64 { return p.BPFPerConnUs })
		s.ConnsMedian = col(func(p Pair) float64 { return p.Conns })
		s.HasP99 = true
		for _, a := range w.Arms {
			s.HasP99 = s.HasP99 && a.Load.HasP99
		}
		for _, name := range accOrder {
			s.Accuracy = append(s.Accuracy, *acc[name])
		}
		w.Summaries = append(w.Summaries, s)
	}
}

// WriteJSON writes the report as dir/<date>-<commit>.json and returns the
// path.
func (r *Report) WriteJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%s.json", r.Start.Format("20060102T150405Z"), sanitize(r.Commit))
	path := filepath.Join(dir, name)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

func sanitize(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// Markers delimit the generated section of BENCHMARKS.md: everything
// between them is replaced by each run, everything around them is kept.
const (
	BeginMarker = "<!-- BEGIN make bench (generated by cmd/galago-bench: edit outside these markers) -->"
	EndMarker   = "<!-- END make bench -->"
)

// UpdateMarkdown replaces the generated section of the file at path (which
// must hold both markers) with r's.
func (r *Report) UpdateMarkdown(path string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := spliceSection(old, r.Markdown())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

func spliceSection(doc []byte, section string) ([]byte, error) {
	b := bytes.Index(doc, []byte(BeginMarker))
	e := bytes.Index(doc, []byte(EndMarker))
	if b < 0 || e < 0 || e < b {
		return nil, errors.New("no generated section: add the lines " + BeginMarker + " and " + EndMarker)
	}
	var out bytes.Buffer
	out.Write(doc[:b+len(BeginMarker)])
	out.WriteString("\n")
	out.WriteString(section)
	out.Write(doc[e:])
	return out.Bytes(), nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// num formats a figure with a thin thousands separator.
func num(v float64, decimals int) string {
	s := fmt.Sprintf("%.*f", decimals, v)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteString(" ")
		}
		b.WriteRune(c)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

// Markdown renders the generated section.
func (r *Report) Markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Measured %s on %s (%d cores, %.0f GiB), Linux %s, galago %s.\n",
		r.Start.Format("2006-01-02 15:04 MST"), m.CPU, m.Cores, float64(m.MemBytes)/(1<<30), m.Kernel, r.Commit)
	st := r.Settings
	fmt.Fprintf(&b, "%d pairs of %.0f s per workload, report_period %d s, load after %.0f s of settling, galago scraped every %.1f s; load average %s at the start, %s at the end.",
		st.Pairs, st.DurationS, st.ReportPeriodS, st.SettleS, st.ScrapeEveryS, m.LoadStart, m.LoadEnd)
	if st.BPFDurationS > 0 {
		fmt.Fprintf(&b, " Throughput, p99 and agent CPU with the kernel's BPF statistics off (the daemon's default); BPF run time from a second %.0f s load of each agent arm with them on.", st.BPFDurationS)
	}
	if st.Peer != "" {
		fmt.Fprintf(&b, " Peer agent: `%s`.", st.Peer)
	}
	b.WriteString("\n")
	if r.Quick {
		b.WriteString("\n**Quick mode** (few, short pairs): a check that the harness works, not figures to quote.\n")
	}
	if noisy(m.LoadStart) {
		fmt.Fprintf(&b, "\n**Noisy machine**: the load average was %s before the run started, so other work competed with the workloads; read the figures as rough.\n", m.LoadStart)
	}
	for _, w := range r.Workloads {
		fmt.Fprintf(&b, "\n### %s\n\n%s.\n\n", w.Name, w.Describe)
		b.WriteString("| agent | throughput off → on (median) | on/off median | on/off every pair | p99 off → on (ms, median) | agent CPU + BPF per 1k requests (ms) | per 100k connections (s) | RSS | Go heap | BPF maps | events lost |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range w.Summaries {
			name := s.Agent
			if len(s.Probes) > 1 || len(s.Probes) == 1 && s.Probes[0] != s.Agent {
				name = fmt.Sprintf("%s (%s)", s.Agent, strings.Join(s.Probes, ", "))
			}
			var pairs []string
			for _, p := range s.Pairs {
				pairs = append(pairs, fmt.Sprintf("%.2f", p.Ratio))
			}
			p99 := "not given"
			if s.HasP99 {
				p99 = fmt.Sprintf("%.2f → %.2f", s.P99Off, s.P99On)
			}
			cost, perConn, rss, heap, maps := "—", "—", "—", "—", "—"
			if s.HasCost {
				bpf := fmt.Sprintf("%.2f", s.BPFPerReqUs)
				if !s.BPFStats {
					bpf = "? (bpf stats off)"
				}
				cost = fmt.Sprintf("%.2f + %s", s.CPUPerReqUs, bpf)
				perConn = fmt.Sprintf("%.2f + %.2f", s.CPUPerConnUs/10, s.BPFPerConnUs/10)
				if !w.ConnPerRequest {
					perConn = fmt.Sprintf("— (%s connections)", num(s.ConnsMedian, 0))
				}
				rss = fmt.Sprintf("%.1f MiB", mib(s.RSSBytes))
				maps = fmt.Sprintf("%.1f MiB", mib(s.MapBytes))
				if s.HeapBytes > 0 {
					heap = fmt.Sprintf("%.1f MiB", mib(s.HeapBytes))
				}
			}
			lost := "—"
			if s.Agent != "peer" {
				lost = lostString(s.Lost, s.RecordsDropped)
			}
			fmt.Fprintf(&b, "| %s | %s → %s /s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				name, num(s.OffMedian, 0), num(s.OnMedian, 0), s.RatioMedian, strings.Join(pairs, " "), p99, cost, perConn, rss, heap, maps, lost)
		}
		var accRows []string
		for _, s := range w.Summaries {
			for _, c := range s.Accuracy {
				verdict := fmt.Sprintf("exact in %d/%d arms", c.Exact, c.Arms)
				if c.InFlight > 0 {
					verdict += fmt.Sprintf(", short by no more than the answers in flight at the load generator's stop in %d", c.InFlight)
				}
				if wrong := c.Arms - c.Exact - c.InFlight; wrong > 0 {
					verdict += fmt.Sprintf(", off in %d: worst %+.0f (%+.4f%%)", wrong, c.Worst, 100*c.Worst/math.Max(1, c.Truth/float64(c.Arms)))
				}
				if !c.Complete {
					verdict += ", a scrape gap exceeded a period"
				}
				accRows = append(accRows, fmt.Sprintf("| %s | %s | %s | %s | %s |", s.Agent, c.Name, num(c.Truth, 0), num(c.Galago, 0), verdict))
			}
		}
		if len(accRows) > 0 {
			b.WriteString("\nAccuracy, summed over the arms (truth: the server's own counters over the load):\n\n")
			b.WriteString("| probe set | figure | truth | galago | verdict |\n|---|---|---|---|---|\n")
			b.WriteString(strings.Join(accRows, "\n") + "\n")
		}
	}
	return b.String()
}

func lostString(lost map[string]float64, dropped float64) string {
	var parts []string
	keys := make([]string, 0, len(lost))
	for k := range lost {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	total := dropped
	for _, k := range keys {
		total += lost[k]
		if lost[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, num(lost[k], 0)))
		}
	}
	if total == 0 {
		return "0"
	}
	if dropped != 0 {
		parts = append(parts, fmt.Sprintf("records dropped %s", num(dropped, 0)))
	}
	return strings.Join(parts, ", ")
}

// noisy: a 1-minute load average of at least 0.5 before the run.
func noisy(load string) bool {
	var l1 float64
	if _, err := fmt.Sscanf(load, "%f", &l1); err != nil {
		return false
	}
	return l1 >= 0.5
}
