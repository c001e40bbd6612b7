package flamegraph

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pushInterval is how often gala-gopher's stackprobe pushes to Pyroscope.
const pushInterval = 20 * time.Second

// pushTimeout is gala-gopher's upload timeout.
const pushTimeout = 3 * time.Second

// pyroscopeAddr validates params.pyroscope_server: "host:port"; anything
// else (empty included) turns the push off, as in gala-gopher.
func pyroscopeAddr(s string) (string, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", false
	}
	return s, true
}

// systemUUID names the machine in Pyroscope application names, as
// gala-gopher's system-uuid (DMI product UUID; the machine id without DMI).
func systemUUID(hostRoot string) string {
	for _, f := range []string{"sys/class/dmi/id/product_uuid", "etc/machine-id"} {
		if b, err := os.ReadFile(filepath.Join(hostRoot, f)); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return strings.ToLower(s)
			}
		}
	}
	return "unknown"
}

// pushRequest is one Pyroscope ingest call.
type pushRequest struct {
	name string
	body []byte
}

// pushRequests builds the ingest calls for one kind's push window: one
// application per type, or per type and process with multi_instance. The
// body is the folded text (a "[pid]comm" root frame keeps processes apart).
func pushRequests(k kind, procs map[int]*procProfile, uuid string, multi bool) []pushRequest {
	pids := make([]int, 0, len(procs))
	for pid := range procs {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	base := fmt.Sprintf("gala-gopher-%s-%s", k, uuid)
	var out []pushRequest
	var all bytes.Buffer
	for _, pid := range pids {
		var buf bytes.Buffer
		_ = writeFolded(&buf, procs[pid].lines()) // a bytes.Buffer does not fail
		if multi {
			out = append(out, pushRequest{fmt.Sprintf("%s.%d", base, pid), buf.Bytes()})
		} else {
			all.Write(buf.Bytes())
		}
	}
	if !multi && all.Len() > 0 {
		out = append(out, pushRequest{base, all.Bytes()})
	}
	return out
}

// ingestURL is gala-gopher's: units "samples"; sampleRate 1000 /
// perf_sample_period for oncpu (samples per second), 1000000 for offcpu,
// whose counts are µs.
func ingestURL(addr, name string, k kind, period time.Duration, from, until time.Time) string {
	rate := int64(1e6)
	if k == onCPU {
		rate = int64(time.Second / period)
	}
	q := url.Values{}
	q.Set("name", name)
	q.Set("from", strconv.FormatInt(from.Unix(), 10))
	q.Set("until", strconv.FormatInt(until.Unix(), 10))
	q.Set("units", "samples")
	if k.isMem() {
		q.Set("units", "bytes")
	}
	q.Set("sampleRate", strconv.FormatInt(rate, 10))
	q.Set("format", "folded")
	return "http://" + addr + "/ingest?" + q.Encode()
}

// push sends the push windows to Pyroscope. A failure is logged at warning
// level once until a push succeeds again (the default server,
// localhost:4040, is often not there).
func (p *Probe) push(ctx context.Context, now time.Time) {
	p.mu.Lock()
	addr, ok := pyroscopeAddr(p.cfg.Params.PyroscopeServer)
	multi := p.cfg.Params.MultiInstance == 1
	period := time.Duration(samplePeriod(p.cfg))
	ws := p.pushWin
	for k := range p.pushWin {
		p.pushWin[k] = newWindow(now)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	client := &http.Client{Timeout: pushTimeout}
	for k, w := range ws {
		for _, r := range pushRequests(kind(k), w.procs, p.uuid, multi) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ingestURL(addr, r.name, kind(k), period, w.start, now), bytes.NewReader(r.body))
			if err != nil {
				p.log.Warn("flamegraph: pyroscope request", "err", err)
				return
			}
			req.Header.Set("Content-Type", "binary/octet-stream")
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = fmt.Errorf("status %s", resp.Status)
				}
			}
			if err != nil {
				if !p.pushFailing {
					p.log.Warn("flamegraph: pyroscope push failed (logged again after a success)", "server", addr, "err", err)
				}
				p.pushFailing = true
				return
			}
			p.pushFailing = false
		}
	}
}
