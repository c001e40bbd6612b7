package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

type fakeProbe struct {
	name        string
	starts      *atomic.Int32
	stops       *atomic.Int32
	reconfigs   *atomic.Int32
	panicOnce   *atomic.Bool // the first run's goroutine panics
	lastCfg     *atomic.Pointer[Config]
	emitRecords bool
}

func (p *fakeProbe) Name() string { return p.name }
func (p *fakeProbe) Start(ctx context.Context, cfg Config, rt Runtime) error {
	p.starts.Add(1)
	p.lastCfg.Store(&cfg)
	rt.Go(func(ctx context.Context) error {
		if p.panicOnce.CompareAndSwap(true, false) {
			panic("boom")
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if p.emitRecords {
					r := table.SystemOs.NewRecord(time.Now(), time.Second)
					r.SetStr(0, "x")
					rt.Record(r)
				}
			}
		}
	})
	return nil
}
func (p *fakeProbe) Stop() error { p.stops.Add(1); return nil }
func (p *fakeProbe) Reconfigure(cfg Config) error {
	p.reconfigs.Add(1)
	p.lastCfg.Store(&cfg)
	return nil
}

type countingPipe struct {
	records atomic.Int64
	mu      sync.Mutex
	meta    [][]string // table names of each WriteMeta
}

func (c *countingPipe) WriteMeta(tables []*table.Table) {
	var names []string
	for _, t := range tables {
		names = append(names, t.Name)
	}
	c.mu.Lock()
	c.meta = append(c.meta, names)
	c.mu.Unlock()
}

func (c *countingPipe) Record(*table.Record, *table.Source) { c.records.Add(1) }
func (c *countingPipe) Event(event.Event)                   {}

type fakeTargets struct{ closed atomic.Bool }

func (*fakeTargets) Mode() snoop.Mode             { return snoop.Whitelist }
func (*fakeTargets) Observed(int) bool            { return true }
func (*fakeTargets) PIDs() []int                  { return nil }
func (*fakeTargets) CgroupIDs() []uint64          { return nil }
func (*fakeTargets) Labels(int) map[string]string { return nil }
func (*fakeTargets) Changed() <-chan struct{}     { return nil }
func (t *fakeTargets) Close()                     { t.closed.Store(true) }
func (w *fakeWatcher) Watch(snoop.Selectors, snoop.Mode) WatchedTargets {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &fakeTargets{}
	w.all = append(w.all, t)
	return t
}

type fakeWatcher struct {
	mu  sync.Mutex
	all []*fakeTargets
}

type harness struct {
	m    *Manager
	fake map[string]*fakeProbe
	pipe *countingPipe
	w    *fakeWatcher
}

func newHarness(t *testing.T, names ...string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{pipe: &countingPipe{}, w: &fakeWatcher{}, fake: map[string]*fakeProbe{}}
	h.m = NewManager(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), h.pipe, h.w)
	for _, n := range names {
		fp := &fakeProbe{name: n, starts: new(atomic.Int32), stops: new(atomic.Int32), reconfigs: new(atomic.Int32),
			panicOnce: new(atomic.Bool), lastCfg: new(atomic.Pointer[Config]), emitRecords: true}
		h.fake[n] = fp
		h.m.Register(n, func() Probe { return fp })
	}
	t.Cleanup(func() { h.m.StopAll(); cancel() })
	return h
}

func (h *harness) put(t *testing.T, feature, body string) error {
	t.Helper()
	return h.m.Put(feature, []byte(body))
}

func (h *harness) get(t *testing.T, feature string) string {
	t.Helper()
	b, err := h.m.Get(feature)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOnChange: the hook runs after each applied Put (start, change,
// stop), never after a refused one.
func TestOnChange(t *testing.T) {
	h := newHarness(t, "tcp")
	var n atomic.Int32
	h.m.OnChange(func() { n.Add(1) })
	for i, c := range []struct {
		body string
		ok   bool
	}{
		{`{"cmd":{"probe":["tcp_rtt"]},"blacklist":{},"state":"running"}`, true},
		{`{"params":{"report_period":4}}`, false},
		{`{"params":{"report_period":30}}`, true},
		{`{"state":"paused"}`, false},
		{`{"state":"stopped"}`, true},
	} {
		before := n.Load()
		err := h.put(t, "tcp", c.body)
		if (err == nil) != c.ok {
			t.Fatalf("put %s: %v", c.body, err)
		}
		if want := before + map[bool]int32{true: 1}[c.ok]; n.Load() != want {
			t.Errorf("put %d (%s, applied %v): hook ran %d times in all, want %d", i, c.body, c.ok, n.Load(), want)
		}
	}
}

// TestPutErrors covers every error message of gala-gopher's reference. Each
// starts with gala-gopher's text and goes on with the reason.
func TestPutErrors(t *testing.T) {
	h := newHarness(t, "tcp", "baseinfo", "io")
	const known = "proc_id, proc_name, pod_id, container_id, container_name, custom_labels, pod_labels"
	cases := []struct{ feature, body, want string }{
		{"haproxy", `{}`, "invalid probe name haproxy"},
		{"l7", `{"state":"running"}`, "not supported in the current version"},
		{"tcp", `not json`, "invalid json format: invalid character 'o' in literal null (expecting 'u') (at byte 2)"},
		{"tcp", `[1,2]`, "invalid json format: the body is a JSON array, want an object"},
		{"tcp", `null`, "invalid json format: the body is null, want an object"},
		{"tcp", `{} {}`, "invalid json format: more than one JSON value"},
		{"tcp", `{"cmd":{}}`, `Bad request: cmd has no "probe" list of sub-items`},
		{"tcp", `{"cmd":["tcp_rtt"]}`, "Bad request: cmd must be an object, got an array"},
		{"tcp", `{"cmd":{"probe":"tcp_rtt"}}`, "Bad request: cmd.probe must be an array of sub-item names, got a string"},
		{"tcp", `{"cmd":{"probe":["tcp_rtt",5]}}`, "Bad request: cmd.probe must be an array of sub-item names, got a number in it"},
		{"tcp", `{"cmd":{"probe":["tcp_nope"]}}`, "unsupported probe range: tcp_nope. Known: tcp_abnormal, tcp_windows, tcp_rtt, tcp_stats, tcp_sockbuf, tcp_rate, tcp_srtt, tcp_delay"},
		{"tcp", `{"params":{}}`, "Bad request: params is empty; give at least one parameter, e.g. report_period"},
		{"tcp", `{"params":[]}`, "Bad request: params must be an object, got an array"},
		{"tcp", `{"params":{"metrics_type":["raw"],"env":"x"}}`, "Bad request: params has no parameter galago knows (got env, metrics_type)"},
		{"tcp", `{"params":{"report_period":"5"}}`, "params.report_period invalid data type: want a number, got a string"},
		{"tcp", `{"params":{"report_period":4}}`, "params.report_period invalid value 4, must be in [5, 600]"},
		{"tcp", `{"params":{"report_period":601}}`, "params.report_period invalid value 601, must be in [5, 600]"},
		{"tcp", `{"params":{"report_period":5.5}}`, "params.report_period invalid value 5.5, must be in [5, 600]: not an integer"},
		{"tcp", `{"params":{"latency_thr":0}}`, "params.latency_thr invalid value 0, must be in [10, 100000]"},
		{"tcp", `{"params":{"ringbuf_map_size":3}}`, "params.ringbuf_map_size invalid value 3, must be a power of 2"},
		{"tcp", `{"params":{"l7_protocol":"http"}}`, "params.l7_protocol invalid data type: want an array of protocol names, got a string"},
		{"tcp", `{"params":{"l7_protocol":["http",1]}}`, "params.l7_protocol invalid data type: want an array of protocol names, got a number in it"},
		{"tcp", `{"params":{"l7_protocol":["gopher"]}}`, "params.l7_protocol invalid value gopher, must be one of http, dns, redis, mysql, pgsql, kafka, mongo, crpc, memcached"},
		{"tcp", `{"params":{"dev_name":"0123456789012345678901234567890123"}}`, "params.dev_name value is too long, len must be less than 32"},
		{"tcp", `{"params":{"dev_name":"eth\udc000"}}`, "params.dev_name invalid value: not valid UTF-8 text"},
		{"tcp", `{"params":{"elf_path":"/tmp/a;rm"}}`, "params.elf_path contains unsafe characters"},
		{"tcp", `{"state":"paused"}`, "invalid state paused: must be running or stopped"},
		{"tcp", `{"state":"running"}`, "invalid probe ranges: at least one must be set"},
		{"tcp", `{"cmd":{"probe":["tcp_rtt"]},"state":"running"}`, `the snooper for tcp cannot be empty: give snoopers, or "blacklist":{} to observe every process`},
		{"baseinfo", `{"cmd":{"probe":["proc","con"]},"state":"running"}`, `the snooper for baseinfo cannot be empty: give snoopers, or "blacklist":{} to observe every process (without them only cpu, mem, nic, net, disk, fs, host collect)`},
		{"tcp", `{"cmd":{"probe":["tcp_rtt"]},"snoopers":{"proc_id":[1]},"blacklist":{"proc_id":[2]}}`, "snoopers and blacklist are mutually exclusive"},
		{"tcp", `{"snoopers":[1]}`, "Error occurs when parsing snooper: snoopers must be an object of selector lists, got an array"},
		{"tcp", `{"blacklist":[1,2]}`, "Error occurs when parsing snooper: blacklist must be an object of selector lists, got an array"},
		{"tcp", `{"snoopers":{"proc_nam":[{"comm":"java"}]}}`, "Error occurs when parsing snooper proc_nam: not a field of snoopers (known: " + known + ")"},
		{"tcp", `{"snoopers":{"procid":[1]}}`, "Error occurs when parsing snooper procid: not a field of snoopers (known: " + known + ")"},
		{"tcp", `{"blacklist":{"custom_labels":{"a":"b"}}}`, "Error occurs when parsing snooper custom_labels: not a field of blacklist (known: proc_id, proc_name, pod_id, container_id, container_name)"},
		{"tcp", `{"snoopers":{"proc_id":"1"}}`, "Error occurs when parsing snooper proc_id: want an array of pids, got a string"},
		{"tcp", `{"snoopers":{"proc_id":["x"]}}`, `Error occurs when parsing snooper proc_id: "x" is not a pid`},
		{"tcp", `{"snoopers":{"proc_id":[1.5]}}`, "Error occurs when parsing snooper proc_id: 1.5 is not a pid (a positive integer up to 4194304)"},
		{"tcp", `{"snoopers":{"proc_id":[0]}}`, "Error occurs when parsing snooper proc_id: pid 0 is not positive"},
		{"tcp", `{"snoopers":{"proc_id":[99999999999]}}`, "Error occurs when parsing snooper proc_id: pid 99999999999 is above 4194304, the largest pid Linux allows"},
		{"tcp", `{"snoopers":{"proc_name":[{"comm":"("}]}}`, "Error occurs when parsing snooper proc_name: comm \"(\": error parsing regexp: missing closing ): `(`"},
		{"tcp", `{"snoopers":{"proc_name":[{"comn":"java"}]}}`, `Error occurs when parsing snooper proc_name: unknown key "comn" (known: comm, cmdline, label, debugging_dir)`},
		{"tcp", `{"snoopers":{"proc_name":[{"comm":5}]}}`, "Error occurs when parsing snooper proc_name: comm must be a string, got a number"},
		{"tcp", `{"snoopers":{"proc_name":{"comm":"java"}}}`, `Error occurs when parsing snooper proc_name: want an array of {"comm", "cmdline", "label"} objects, got an object`},
		{"tcp", "{\"snoopers\":{\"proc_name\":[{\"comm\":\"ja\xffva\"}]}}", "Error occurs when parsing snooper proc_name: not valid UTF-8 text: galago could not keep it unchanged"},
		{"tcp", `{"snoopers":{"proc_name":[{"comm":"\udc80"}]}}`, "Error occurs when parsing snooper proc_name: not valid UTF-8 text: galago could not keep it unchanged"},
		{"tcp", `{"snoopers":{"container_name":["a",1]}}`, "Error occurs when parsing snooper container_name: want an array of strings, got 1 in it"},
		{"tcp", `{"snoopers":{"pod_id":[7]}}`, "Error occurs when parsing snooper pod_id: want an array of strings, got 7 in it"},
		{"tcp", `{"snoopers":{"custom_labels":["a"]}}`, "Error occurs when parsing snooper custom_labels: want an object of string values, got an array"},
	}
	for _, c := range cases {
		err := h.put(t, c.feature, c.body)
		if err == nil || err.Error() != c.want {
			t.Errorf("PUT /%s %s:\n got %v\nwant %s", c.feature, c.body, err, c.want)
		}
	}
	if _, err := h.m.Get("haproxy"); !errors.Is(err, ErrUnknownFeature) {
		t.Errorf("GET unknown: %v", err)
	}
	for _, f := range []string{"tcp", "baseinfo"} {
		if got := h.get(t, f); got != "{}\n" {
			t.Errorf("failed PUTs configured %s: %q", f, got)
		}
	}
	if h.fake["tcp"].starts.Load() != 0 {
		t.Error("a failed PUT started the probe")
	}
	for _, body := range []string{`{"cmd":{}}`, `{"params":{}}`} {
		if err := h.put(t, "tcp", body); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v does not wrap ErrBadRequest", body, err)
		}
	}
}

// TestNonASCIITextRoundTrips: text that is valid UTF-8 (a surrogate pair
// escape included) is stored and echoed exactly.
func TestNonASCIITextRoundTrips(t *testing.T) {
	h := newHarness(t, "tcp")
	if err := h.put(t, "tcp", `{"snoopers":{"proc_name":[{"comm":"^データ\ud83d\ude00$","cmdline":"é"}]}}`); err != nil {
		t.Fatal(err)
	}
	if got := h.get(t, "tcp"); !strings.Contains(got, `"proc_name":[{"cmdline":"é","comm":"^データ😀$"}]`) {
		t.Fatalf("GET %s", got)
	}
}

// TestBaseinfoWithoutSnoopers: the seed README's probes.init line (with the
// "bin":"system_infos" of gala-gopher's thread) runs baseinfo's host-wide
// sub-items without snoopers, as the documents show; process-level
// sub-items are accepted beside them, observe nothing, and one log line
// says so.
func TestBaseinfoWithoutSnoopers(t *testing.T) {
	h := newHarness(t, "baseinfo")
	var logs bytes.Buffer
	h.m.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := h.put(t, "baseinfo", `{"cmd":{"bin":"system_infos","probe":["cpu","fs","host"]},"state":"running"}`); err != nil {
		t.Fatal(err)
	}
	want := `{"cmd":{"bin":"","probe":["cpu","fs","host"]},"params":{"dev_name":"","elf_path":"","report_event":0,"report_period":60,"res_lower_thr":0,"res_upper_thr":0},"snoopers":{},"state":"running"}` + "\n"
	if got := h.get(t, "baseinfo"); got != want {
		t.Fatalf("GET\n got %s\nwant %s", got, want)
	}
	if strings.Contains(logs.String(), "observe no process") {
		t.Fatalf("host-wide sub-items only, yet logged: %s", logs.String())
	}
	if err := h.put(t, "baseinfo", `{"cmd":{"probe":["cpu","proc","con"]}}`); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var warned []string
	for _, l := range lines {
		if strings.Contains(l, "observe no process") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `msg="baseinfo: sub-items proc, con observe no process until snoopers or a blacklist are given; cpu collect host-wide"`) {
		t.Fatalf("log lines %q", warned)
	}
	if c := h.fake["baseinfo"].lastCfg.Load(); c.SubItems != 0x1|0x40|0x100 {
		t.Fatalf("sub-items %#x", c.SubItems)
	}
}

func TestPutMergeRollbackAndGet(t *testing.T) {
	h := newHarness(t, "tcp")
	ok := func(body string) {
		t.Helper()
		if err := h.put(t, "TCP", body); err != nil {
			t.Fatalf("PUT %s: %v", body, err)
		}
	}
	ok(`{"cmd":{"probe":["tcp_rtt","tcp_stats"]},"snoopers":{"proc_id":[101],"proc_name":[{"comm":"^java$","cmdline":"x","label":{"app":"a"}}]},"params":{"report_period":5,"drops_thr":10},"state":"running"}`)
	got := h.get(t, "tcp")
	exp := `{"cmd":{"bin":"","probe":["tcp_rtt","tcp_stats"]},"params":{"cluster_ip_backend":0,"dev_name":"","drops_thr":10,"report_cport":0,"report_event":0,"report_period":5,"res_lower_thr":0,"res_upper_thr":0,"ringbuf_map_size":1,"sample_period":5000},"snoopers":{"container_id":[],"container_name":[],"pod_id":[],"proc_id":[101],"proc_name":[{"cmdline":"x","comm":"^java$"}]},"state":"running"}` + "\n"
	if got != exp {
		t.Fatalf("GET:\n got %s\nwant %s", got, exp)
	}
	fp := h.fake["tcp"]
	if fp.starts.Load() != 1 {
		t.Fatalf("starts = %d", fp.starts.Load())
	}
	// params merge key by key; a running probe is reconfigured, not restarted.
	ok(`{"params":{"report_event":1}}`)
	if fp.starts.Load() != 1 || fp.reconfigs.Load() != 1 {
		t.Fatalf("starts %d reconfigs %d", fp.starts.Load(), fp.reconfigs.Load())
	}
	if c := fp.lastCfg.Load(); c.Params.ReportPeriod != 5 || c.Params.ReportEvent != 1 || c.Params.DropsThr != 10 {
		t.Fatalf("merged params %+v", c.Params)
	}
	// Rollback: a valid cmd followed by an invalid param changes nothing.
	before := h.get(t, "tcp")
	if err := h.put(t, "tcp", `{"cmd":{"probe":["tcp_abnormal"]},"params":{"report_period":1}}`); err == nil {
		t.Fatal("invalid params accepted")
	}
	if after := h.get(t, "tcp"); after != before {
		t.Fatalf("rollback failed:\n%s\n%s", before, after)
	}
	// ringbuf_map_size only changes while stopped.
	if err := h.put(t, "tcp", `{"params":{"ringbuf_map_size":2}}`); err == nil || err.Error() != "params.ringbuf_map_size can only be changed while the probe is stopped" {
		t.Fatalf("ringbuf change while running: %v", err)
	}
	// New snoopers: new targets, the old ones closed.
	ok(`{"snoopers":{"proc_id":[202]}}`)
	h.w.mu.Lock()
	if n := len(h.w.all); n != 2 || !h.w.all[0].closed.Load() || h.w.all[1].closed.Load() {
		t.Fatalf("targets: %d, first closed %v", n, h.w.all[0].closed.Load())
	}
	h.w.mu.Unlock()
	// Blacklist mode is echoed as "blacklist"; "{}" observes everything.
	ok(`{"blacklist":{}}`)
	if got := h.get(t, "tcp"); !strings.Contains(got, `"blacklist":{}`) || strings.Contains(got, `"snoopers"`) {
		t.Fatalf("blacklist GET: %s", got)
	}
	ok(`{"state":"stopped"}`)
	if fp.stops.Load() != 1 {
		t.Fatalf("stops = %d", fp.stops.Load())
	}
	if got := h.get(t, "tcp"); !strings.Contains(got, `"state":"stopped"`) {
		t.Fatalf("GET after stop: %s", got)
	}
}

// TestFaultIsolation: a probe whose goroutine panics is restarted with
// backoff while another probe keeps emitting.
func TestFaultIsolation(t *testing.T) {
	h := newHarness(t, "tcp", "io")
	h.fake["tcp"].panicOnce.Store(true)
	if err := h.put(t, "io", `{"cmd":{"probe":["io_count"]},"state":"running"}`); err != nil {
		t.Fatal(err)
	}
	if err := h.put(t, "tcp", `{"cmd":{"probe":["tcp_rtt"]},"blacklist":{},"state":"running"}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.fake["tcp"].starts.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.fake["tcp"].starts.Load() != 2 {
		t.Fatalf("tcp not restarted: starts=%d", h.fake["tcp"].starts.Load())
	}
	var tcp, io ProbeStatus
	for _, st := range h.m.Statuses() {
		switch st.Name {
		case "tcp":
			tcp = st
		case "io":
			io = st
		}
	}
	if tcp.Restarts != 1 || tcp.Errors != 1 || tcp.Status != StatusRunning || !strings.Contains(tcp.LastError, "panic: boom") {
		t.Fatalf("tcp status %+v", tcp)
	}
	if io.Status != StatusRunning || io.Restarts != 0 || h.fake["io"].starts.Load() != 1 {
		t.Fatalf("io disturbed: %+v", io)
	}
	n := h.pipe.records.Load()
	time.Sleep(50 * time.Millisecond)
	if h.pipe.records.Load() <= n {
		t.Fatal("records stopped flowing")
	}
	h.m.StopAll()
	if h.fake["tcp"].stops.Load() != 2 || h.fake["io"].stops.Load() != 1 {
		t.Fatalf("stops tcp=%d io=%d", h.fake["tcp"].stops.Load(), h.fake["io"].stops.Load())
	}
	if err := h.put(t, "io", `{"state":"running"}`); err == nil {
		t.Fatal("PUT accepted after shutdown")
	}
}

// A probe whose Start panics fails the PUT and leaves the daemon running.
func TestStartPanic(t *testing.T) {
	h := newHarness(t)
	h.m.Register("virt", func() Probe { return panicky{} })
	err := h.put(t, "virt", `{"state":"running"}`)
	if err == nil || !strings.Contains(err.Error(), "failed to start probe: panic: start exploded") {
		t.Fatalf("err = %v", err)
	}
	if got := h.get(t, "virt"); got != "{}\n" {
		t.Fatalf("config kept after failed start: %q", got)
	}
}

type panicky struct{}

func (panicky) Name() string                                 { return "virt" }
func (panicky) Start(context.Context, Config, Runtime) error { panic("start exploded") }
func (panicky) Stop() error                                  { return nil }

func TestMustSubItemBit(t *testing.T) {
	if got := MustSubItemBit("tcp", "tcp_stats"); got != 0x8 {
		t.Fatalf("tcp_stats bit = %#x, want 0x8 (gala-gopher's value)", got)
	}
	if got := MustSubItemBit("baseinfo", "con"); got != 0x100 {
		t.Fatalf("con bit = %#x, want 0x100", got)
	}
	for _, c := range [][2]string{{"tcp", "nope"}, {"nope", "cpu"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustSubItemBit(%q, %q) did not panic", c[0], c[1])
				}
			}()
			MustSubItemBit(c[0], c[1])
		}()
	}
}

// TestSavedKeepsLabels: the configuration saved to probes.init holds the
// labels GET does not echo, and applying it to a fresh manager restores the
// same configuration, in whitelist and in blacklist mode.
func TestSavedKeepsLabels(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		podLabels  []string
	}{
		{
			`{"cmd":{"probe":["tcp_rtt"]},"snoopers":{"proc_name":[{"comm":"^java$","label":{"app":"kafka"}}],"custom_labels":{"env":"prod"},"pod_labels":["team"]},"state":"running"}`,
			`{"cmd":{"bin":"","probe":["tcp_rtt"]},"params":{"cluster_ip_backend":0,"dev_name":"","report_cport":0,"report_event":0,"report_period":60,"res_lower_thr":0,"res_upper_thr":0,"ringbuf_map_size":1,"sample_period":5000},"snoopers":{"container_id":[],"container_name":[],"custom_labels":{"env":"prod"},"pod_id":[],"pod_labels":["team"],"proc_id":[],"proc_name":[{"cmdline":"","comm":"^java$","label":{"app":"kafka"}}]},"state":"running"}` + "\n",
			[]string{"team"},
		},
		{
			`{"cmd":{"probe":["tcp_rtt"]},"snoopers":{"custom_labels":{"env":"prod"}},"blacklist":{"proc_id":[7]},"state":"running"}`,
			`{"blacklist":{"container_id":[],"container_name":[],"pod_id":[],"proc_id":[7],"proc_name":[]},"cmd":{"bin":"","probe":["tcp_rtt"]},"params":{"cluster_ip_backend":0,"dev_name":"","report_cport":0,"report_event":0,"report_period":60,"res_lower_thr":0,"res_upper_thr":0,"ringbuf_map_size":1,"sample_period":5000},"snoopers":{"custom_labels":{"env":"prod"}},"state":"running"}` + "\n",
			nil,
		},
	} {
		h := newHarness(t, "tcp")
		if err := h.put(t, "tcp", tc.body); err != nil {
			t.Fatal(err)
		}
		saved, err := h.m.Saved("tcp")
		if err != nil || string(saved) != tc.want {
			t.Fatalf("Saved:\n got %s\nwant %s", saved, tc.want)
		}
		if got := h.get(t, "tcp"); strings.Contains(got, "label") {
			t.Fatalf("GET echoes labels: %s", got)
		}
		fresh := newHarness(t, "tcp")
		if err := fresh.put(t, "tcp", string(saved)); err != nil {
			t.Fatalf("re-apply: %v", err)
		}
		if again, _ := fresh.m.Saved("tcp"); string(again) != string(saved) {
			t.Fatalf("re-applied:\n got %s\nwant %s", again, saved)
		}
		if c := fresh.fake["tcp"].lastCfg.Load(); c.CustomLabels["env"] != "prod" {
			t.Fatalf("custom labels not restored: %v", c.CustomLabels)
		}
		if c := fresh.fake["tcp"].lastCfg.Load(); !slices.Equal(c.PodLabels, tc.podLabels) {
			t.Fatalf("pod labels given to the probe: %v, want %v", c.PodLabels, tc.podLabels)
		}
	}
}

// tablesProbe is a fakeProbe with tables.
type tablesProbe struct{ *fakeProbe }

func (tablesProbe) Tables() []*table.Table { return []*table.Table{table.SystemOs} }

// TestMetaWrittenWhenProbeStarts: a probe that starts has its tables'
// metadata written at once (issue: at start, every 10 minutes, and when a
// probe starts); a restart by PUT writes it again.
func TestMetaWrittenWhenProbeStarts(t *testing.T) {
	h := newHarness(t)
	fp := &fakeProbe{name: "baseinfo", starts: new(atomic.Int32), stops: new(atomic.Int32), reconfigs: new(atomic.Int32),
		panicOnce: new(atomic.Bool), lastCfg: new(atomic.Pointer[Config])}
	h.m.Register("baseinfo", func() Probe { return tablesProbe{fp} })
	body := `{"cmd":{"probe":["cpu"]},"snoopers":{"proc_id":[1]},"state":"running"}`
	for i := 1; i <= 2; i++ {
		if err := h.put(t, "baseinfo", body); err != nil {
			t.Fatal(err)
		}
		h.pipe.mu.Lock()
		got := fmt.Sprint(h.pipe.meta)
		h.pipe.mu.Unlock()
		if want := strings.Repeat("[system_os] ", i); got != "["+strings.TrimSpace(want)+"]" {
			t.Errorf("after start %d: metadata written %s, want one [system_os] per start", i, got)
		}
		if err := h.put(t, "baseinfo", `{"state":"stopped"}`); err != nil {
			t.Fatal(err)
		}
	}
}
