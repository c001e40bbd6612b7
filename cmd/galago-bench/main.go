// Command galago-bench is `make bench`: it measures galago's cost to the
// applications it observes, its own footprint and its accuracy, against
// no agent (and optionally a peer agent) in one interleaved run, and writes
// a JSON file of every raw figure plus the generated section of
// BENCHMARKS.md. Wiring only: the workloads, arms, samplers and report are
// in internal/bench.
//
//	galago-bench [-quick] [-pairs N] [-duration D] [-workload a,b] [-probes a,b] [-out DIR] [-md FILE]
//
// PEER_AGENT_CMD names a shell command that starts another agent in the
// foreground; PEER_AGENT_URL (optional) is its metrics URL, polled until it
// answers 200 and scraped during its arms as galago is; without it
// PEER_AGENT_WARMUP (default 10s) is waited.
//
// -from FILE re-renders the markdown section from a stored JSON result,
// without measuring.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "galago-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		galago   = flag.String("galago", "bin/galago", "galago binary to measure")
		pairs    = flag.Int("pairs", 5, "rounds per workload: each runs no agent, every probe set (and the peer) once")
		duration = flag.Duration("duration", 20*time.Second, "length of each workload run")
		bpfDur   = flag.Duration("bpf-duration", 0, "length of each agent arm's second run, with the kernel's BPF statistics on, that BPF run time is read from (default: half of -duration)")
		period   = flag.Int("period", 5, "galago report_period in seconds")
		quick    = flag.Bool("quick", false, "development run: 2 pairs of 5 s (unless -pairs/-duration are given)")
		wls      = flag.String("workload", "", "comma-separated workloads to run (default all): "+names(bench.Workloads, bench.Workload.Name))
		sets     = flag.String("probes", "", "comma-separated probe sets to run (default all): "+names(bench.ProbeSets, func(s bench.ProbeSet) string { return s.Name }))
		out      = flag.String("out", "bench/results", "directory of the JSON results")
		md       = flag.String("md", "BENCHMARKS.md", "markdown file whose generated section is replaced (\"\" for none)")
		commit   = flag.String("commit", "", "version measured (default: git describe --always --dirty)")
		keep     = flag.Bool("keep", false, "keep the temporary directory (server and agent files)")
		cpuprof  = flag.String("cpuprofile", "", "directory for a Go CPU profile of each galago arm over its load")
		memprof  = flag.String("allocprofile", "", "directory for a Go allocation profile of each galago arm over its load")
		from     = flag.String("from", "", "render -md from this JSON result instead of measuring")
		nprocs   = flag.Int("procs", 0, "instead of the workloads: galago's RSS and Go heap with the proc probe (every sub-item) before and after this many sleeping processes start")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *from != "" {
		return render(*from, *md)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["pairs"] {
			*pairs = 2
		}
		if !set["duration"] {
			*duration = 5 * time.Second
		}
	}
	if *commit == "" {
		*commit = gitDescribe()
	}
	warmup := 10 * time.Second
	if v := os.Getenv("PEER_AGENT_WARMUP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("PEER_AGENT_WARMUP=%q: %w", v, err)
		}
		warmup = d
	}
	tmp, err := os.MkdirTemp("", "galago-bench-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin, err := filepath.Abs(*galago)
	if err != nil {
		return err
	}
	if *nprocs > 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := bench.MeasureProcs(ctx, bin, tmp, *nprocs, *period, os.Stdout)
		if err != nil {
			return err
		}
		b, _ := json.MarshalIndent(res, "", " ")
		fmt.Println(string(b))
		return nil
	}
	cfg := bench.Config{
		Galago: bin, Pairs: *pairs, Duration: *duration, BPFDuration: *bpfDur, ReportPeriod: *period,
		Workloads: split(*wls), ProbeSets: split(*sets),
		Peer:   bench.PeerConfig{Cmd: os.Getenv("PEER_AGENT_CMD"), MetricsURL: os.Getenv("PEER_AGENT_URL"), Warmup: warmup},
		Commit: *commit, Quick: *quick, TempDir: tmp,
		Log:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Progress: os.Stdout, ProfileDir: *cpuprof, AllocProfileDir: *memprof,
	}
	// Ctrl-C or SIGTERM cancels the run; Run stops every process it
	// started before returning.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		if rep != nil && len(rep.Workloads) > 0 {
			// Partial figures go to the JSON only: BENCHMARKS.md shows
			// complete runs.
			if path, werr := rep.WriteJSON(*out); werr == nil {
				fmt.Fprintln(os.Stderr, "partial results:", path)
			}
		}
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted: every server and agent was stopped")
		}
		return err
	}
	path, err := rep.WriteJSON(*out)
	if err != nil {
		return err
	}
	fmt.Println("results:", path)
	if *md != "" {
		if err := rep.UpdateMarkdown(*md); err != nil {
			return err
		}
		fmt.Println("updated:", *md)
	}
	fmt.Print("\n" + rep.Markdown())
	return nil
}

// render regenerates the markdown section from a stored result.
func render(from, md string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	if md == "" {
		fmt.Print(rep.Markdown())
		return nil
	}
	if rep.Error != "" {
		return fmt.Errorf("%s is a partial run (%s): not rendered into %s", from, rep.Error, md)
	}
	if err := rep.UpdateMarkdown(md); err != nil {
		return err
	}
	fmt.Println("updated:", md)
	return nil
}

func names[T any](all []T, name func(T) string) string {
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = name(t)
	}
	return strings.Join(out, ", ")
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func gitDescribe() string {
	b, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
