package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Galago is one galago daemon started for one arm: a private config whose
// every file lives in its directory, loopback ports of its own, pprof on
// for the Go heap figure, and the probe set enabled over REST.
type Galago struct {
	bin, dir                        string
	reportPeriod                    int
	metricPort, restPort, pprofPort int
	proc                            *realsrv.Proc
}

// galagoConf is the arm's config: gala-gopher's shipped imdb limits and
// channels as examples/galago-run.conf (make run), log level info.
const galagoConf = `
global = { log_file_name = "gopher.log"; log_level = "info"; rest_api_on = true; };
metric = { out_channel = "web_server"; kafka_topic = "gala_gopher"; };
event = { out_channel = "logs"; kafka_topic = "gala_gopher_event"; timeout = 600; };
meta = { out_channel = "logs"; kafka_topic = "gala_gopher_metadata"; };
imdb = { max_tables_num = 1024; max_records_num = 1024; max_metrics_num = 64; record_timeout = 60; };
web_server = { bind_addr = "127.0.0.1"; port = %[2]d; ssl_auth = "off"; };
rest_api_server = { bind_addr = "127.0.0.1"; port = %[3]d; ssl_auth = "off"; };
logs = {
    metric_total_size = 100;
    metric_dir = "%[1]s/metrics"; event_dir = "%[1]s/event"; meta_dir = "%[1]s/meta"; debug_dir = "%[1]s/debug";
};
galago = {
    pid_file = "%[1]s/galago.pid"; cmd_socket = "%[1]s/cmd.sock";
    probes_init = "%[1]s/probes.init"; custom_json = "%[1]s/gala-gopher-custom.json";
};
`

// StartGalago starts the daemon in dir and enables set; it returns once
// every feature of the set reports galago_probe_up 1.
func StartGalago(ctx context.Context, procs *realsrv.Procs, bin, dir string, set ProbeSet, reportPeriod int) (*Galago, error) {
	g := &Galago{bin: bin, dir: dir, reportPeriod: reportPeriod}
	for _, p := range []*int{&g.metricPort, &g.restPort, &g.pprofPort} {
		var err error
		if *p, err = realsrv.FreePort(); err != nil {
			return nil, err
		}
	}
	conf := filepath.Join(dir, "gala-gopher.conf")
	if err := realsrv.WriteFile(conf, fmt.Sprintf(galagoConf, dir, g.metricPort, g.restPort), 0o640); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", conf)
	cmd.Env = append(os.Environ(), fmt.Sprintf("GALAGO_PPROF_ADDR=127.0.0.1:%d", g.pprofPort))
	var err error
	if g.proc, err = procs.Start("galago", cmd); err != nil {
		return nil, err
	}
	if err := g.waitUp(ctx, 30*time.Second, "galago REST and metrics", func() error {
		if _, err := fetch(ctx, g.restURL("/baseinfo")); err != nil {
			return err
		}
		_, err := fetch(ctx, g.metricsURL())
		return err
	}); err != nil {
		_ = g.Stop() // failed already: the start-up error says why
		return nil, err
	}
	for _, p := range set.Probes {
		if err := g.put(ctx, p.Feature, p.Body(reportPeriod)); err != nil {
			_ = g.Stop()
			return nil, err
		}
	}
	if err := g.waitUp(ctx, 60*time.Second, "probes "+strings.Join(set.Features(), ", ")+" running", func() error {
		e, err := g.Scrape(ctx)
		if err != nil {
			return err
		}
		for _, f := range set.Features() {
			if e.Sum("galago_probe_up", map[string]string{"probe": f}) != 1 {
				return fmt.Errorf("galago_probe_up{probe=%q} is not 1", f)
			}
		}
		return nil
	}); err != nil {
		_ = g.Stop()
		return nil, err
	}
	return g, nil
}

// waitUp waits for cond, failing at once when the daemon exits.
func (g *Galago) waitUp(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	err := realsrv.WaitFor(ctx, timeout, what, func() error {
		select {
		case <-g.proc.Exited():
			return fmt.Errorf("galago exited: %w", g.proc.Err())
		default:
		}
		return cond()
	})
	if err != nil {
		return fmt.Errorf("%w\ngalago output:\n%s", err, realsrv.Tail([]byte(g.proc.Output.String()), 3000))
	}
	select {
	case <-g.proc.Exited():
		return fmt.Errorf("galago exited: %w\n%s", g.proc.Err(), realsrv.Tail([]byte(g.proc.Output.String()), 3000))
	default:
	}
	return nil
}

func (g *Galago) restURL(p string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", g.restPort, p) }
func (g *Galago) metricsURL() string      { return fmt.Sprintf("http://127.0.0.1:%d/metrics", g.metricPort) }

// put sends PUT /<feature> with body json=<js>, as curl -d does.
func (g *Galago) put(ctx context.Context, feature, js string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, g.restURL("/"+feature), strings.NewReader("json="+url.QueryEscape(js)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT /%s: %w", feature, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"success"`)) {
		return fmt.Errorf("PUT /%s %s: %s %s", feature, js, resp.Status, body)
	}
	return nil
}

// Pid is the daemon's process id.
func (g *Galago) Pid() int { return g.proc.Pid() }

// Scrape reads and parses /metrics.
func (g *Galago) Scrape(ctx context.Context) (Exposition, error) {
	b, err := fetch(ctx, g.metricsURL())
	if err != nil {
		return nil, err
	}
	return parseExposition(b)
}

// CPUProfile is a Go CPU profile of the daemon over the next secs seconds.
func (g *Galago) CPUProfile(ctx context.Context, secs int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+10*time.Second)
	defer cancel()
	return fetchWith(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", g.pprofPort, secs))
}

// HeapBytes is the Go heap in use (runtime.MemStats HeapAlloc) read from
// the daemon's pprof heap page.
func (g *Galago) HeapBytes(ctx context.Context) (uint64, error) {
	b, err := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", g.pprofPort))
	if err != nil {
		return 0, err
	}
	return parseMemStat(b, "HeapAlloc")
}

// TotalAlloc is the bytes the daemon allocated since it started
// (runtime.MemStats TotalAlloc), from its pprof heap page.
func (g *Galago) TotalAlloc(ctx context.Context) (uint64, error) {
	b, err := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", g.pprofPort))
	if err != nil {
		return 0, err
	}
	return parseMemStat(b, "TotalAlloc")
}

// AllocProfile is a Go allocation profile of the daemon over the next
// secs seconds (what was allocated then, by stack).
func (g *Galago) AllocProfile(ctx context.Context, secs int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+10*time.Second)
	defer cancel()
	return fetchWith(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/allocs?seconds=%d", g.pprofPort, secs))
}

// parseMemStat finds "# <name> = N" (a runtime.MemStats field) in a
// debug=1 heap profile.
func parseMemStat(b []byte, name string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# "+name+" = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("pprof heap page has no \"# %s = \" line", name)
}

// Stop stops the daemon (SIGTERM, SIGKILL after 20 s).
func (g *Galago) Stop() error { return g.proc.Stop(20 * time.Second) }

// Peer is another agent started by a shell command (PEER_AGENT_CMD) in
// the foreground: its CPU, RSS and BPF figures are read from its process
// tree as galago's are.
type Peer struct {
	proc *realsrv.Proc
}

// PeerConfig says how to start and wait for the peer.
type PeerConfig struct {
	// Cmd is run with sh -c; it must stay in the foreground (the agent
	// itself, or exec of it).
	Cmd string
	// MetricsURL, when set, is the peer's metrics endpoint: polled until
	// it answers 200 (otherwise the harness waits Warmup), then scraped
	// during its arms as often as galago is, so both pay for being scraped.
	MetricsURL string
	Warmup     time.Duration
}

// StartPeer starts the peer agent and waits until it is ready.
func StartPeer(ctx context.Context, procs *realsrv.Procs, dir string, cfg PeerConfig) (*Peer, error) {
	cmd := exec.Command("sh", "-c", cfg.Cmd)
	cmd.Dir = dir
	proc, err := procs.Start("peer agent", cmd)
	if err != nil {
		return nil, err
	}
	p := &Peer{proc: proc}
	exited := func() error {
		select {
		case <-proc.Exited():
			return fmt.Errorf("peer agent %q exited: %w\n%s", cfg.Cmd, proc.Err(), realsrv.Tail([]byte(proc.Output.String()), 3000))
		default:
			return nil
		}
	}
	if cfg.MetricsURL != "" {
		err = realsrv.WaitFor(ctx, 120*time.Second, "peer agent at "+cfg.MetricsURL, func() error {
			if err := exited(); err != nil {
				return err
			}
			_, err := fetch(ctx, cfg.MetricsURL)
			return err
		})
	} else {
		select {
		case <-time.After(cfg.Warmup):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		err = exited()
	}
	if err != nil {
		_ = proc.Stop(15 * time.Second)
		return nil, err
	}
	return p, nil
}

// Pid is the peer's root process (the shell, or the agent after exec).
func (p *Peer) Pid() int { return p.proc.Pid() }

// Stop stops the peer's process group (SIGTERM, SIGKILL after 15 s).
func (p *Peer) Stop() error { return p.proc.Stop(15 * time.Second) }
