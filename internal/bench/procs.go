package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/realsrv"
)

// ProcsResult is the agent's footprint with many idle processes observed
// (issue 9: "RSS with 1,000 processes"): the proc probe with every
// sub-item observing the host, before and two report periods after N
// sleeping processes were started.
type ProcsResult struct {
	N int `json:"n"`
	// Observed is how many of the N processes the proc probe reported
	// (distinct tgid labels of its tables).
	Observed       int    `json:"observed"`
	RSSBefore      uint64 `json:"rss_before"`
	RSSAfter       uint64 `json:"rss_after"`
	HeapBefore     uint64 `json:"heap_before"`
	HeapAfter      uint64 `json:"heap_after"`
	MapBytesBefore uint64 `json:"map_bytes_before"`
	MapBytesAfter  uint64 `json:"map_bytes_after"`
}

// MeasureProcs starts galago (bin, in dir) with the proc probe, waits two
// report periods, samples it, starts n `sleep` processes, waits two
// periods more and samples it again; every process it started is stopped
// before it returns.
func MeasureProcs(ctx context.Context, bin, dir string, n, period int, progress io.Writer) (ProcsResult, error) {
	res := ProcsResult{N: n}
	procs := realsrv.NewProcs()
	defer procs.Close()
	g, err := StartGalago(ctx, procs, bin, dir, ProbeSet{Name: "proc", Probes: []ProbeConfig{procAll}}, period)
	if err != nil {
		return res, err
	}
	defer func() { _ = g.Stop() }()
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(2*period)*time.Second + time.Second):
			return nil
		}
	}
	sample := func(rss, heap, maps *uint64) error {
		s, err := Sampler{}.Sample(g.Pid())
		if err != nil {
			return err
		}
		*rss, *maps = s.RSSBytes, s.MapBytes
		*heap, err = g.HeapBytes(ctx)
		return err
	}
	if err := wait(); err != nil {
		return res, err
	}
	if err := sample(&res.RSSBefore, &res.HeapBefore, &res.MapBytesBefore); err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "procs: galago RSS %d MiB with the host's processes; starting %d sleeping processes\n", res.RSSBefore>>20, n)
	pids := map[string]bool{}
	var sleepers []*realsrv.Proc
	defer func() {
		for _, p := range sleepers {
			_ = p.Stop(time.Second)
		}
	}()
	for i := range n {
		p, err := procs.Start("sleep-"+strconv.Itoa(i), exec.Command("sleep", "3600"))
		if err != nil {
			return res, err
		}
		sleepers = append(sleepers, p)
		pids[strconv.Itoa(p.Pid())] = true
	}
	if err := wait(); err != nil {
		return res, err
	}
	if err := sample(&res.RSSAfter, &res.HeapAfter, &res.MapBytesAfter); err != nil {
		return res, err
	}
	e, err := g.Scrape(ctx)
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for fam := range e {
		if !strings.HasPrefix(fam, "gala_gopher_proc_") {
			continue
		}
		for tgid := range e.ByLabel(fam, "tgid") {
			if pids[tgid] {
				seen[tgid] = true
			}
		}
	}
	res.Observed = len(seen)
	fmt.Fprintf(progress, "procs: galago RSS %d MiB, Go heap %d MiB, BPF maps %d MiB with %d more processes (%d reported)\n",
		res.RSSAfter>>20, res.HeapAfter>>20, res.MapBytesAfter>>20, n, res.Observed)
	return res, nil
}
