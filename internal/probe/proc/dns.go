package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/elfsym"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// resolverFuncs are the C library's name resolution functions probed for
// proc_dns, with the entry program of each (the return program is shared).
var resolverFuncs = []struct {
	symbol string
	enter  func(*procObjects) *ebpf.Program
}{
	{"getaddrinfo", func(o *procObjects) *ebpf.Program { return o.ProcGaiEnter }},
	{"gethostbyname", func(o *procObjects) *ebpf.Program { return o.ProcGhbnEnter }},
	{"gethostbyname2", func(o *procObjects) *ebpf.Program { return o.ProcGhbnEnter }},
}

// libID is a file's identity: uprobes attach to an inode, whatever path
// (host or container root) names it.
type libID struct{ dev, ino uint64 }

// dnsHooks attaches the resolver uprobes to the C libraries the observed
// processes map, once per library file. Not safe for concurrent use: the
// probe holds its lock around it.
type dnsHooks struct {
	objs     *procObjects
	procRoot string
	libs     map[libID][]link.Link
	failed   map[libID]bool // attach failed once: not retried every period
}

func newDNSHooks(objs *procObjects, procRoot string) *dnsHooks {
	return &dnsHooks{objs: objs, procRoot: procRoot, libs: map[libID][]link.Link{}, failed: map[libID]bool{}}
}

// isLibc tells whether a mapped file's name is a C library that holds the
// resolver: glibc's libc.so.6 (or libc-2.x.so) and musl's libc.
func isLibc(path string) bool {
	base := filepath.Base(path)
	return base == "libc.so.6" || (strings.HasPrefix(base, "libc-") && strings.HasSuffix(base, ".so")) ||
		strings.HasPrefix(base, "ld-musl-") || strings.HasPrefix(base, "libc.musl-")
}

// libcPaths parses /proc/<pid>/maps and returns the C library files it
// maps (their paths inside the process's root).
func libcPaths(maps []byte) []string {
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") || !isLibc(f[5]) || seen[f[5]] {
			continue
		}
		seen[f[5]] = true
		out = append(out, f[5])
	}
	return out
}

// scan attaches to the C libraries of pids not attached yet; a process
// that exited meanwhile is skipped.
func (d *dnsHooks) scan(pids []int) error {
	var errs []error
	for _, pid := range pids {
		maps, err := os.ReadFile(filepath.Join(d.procRoot, strconv.Itoa(pid), "maps"))
		if err != nil {
			continue // gone
		}
		for _, p := range libcPaths(maps) {
			// Through the process's own root: a container's libc.
			path := filepath.Join(d.procRoot, strconv.Itoa(pid), "root", p)
			var st syscall.Stat_t
			if syscall.Stat(path, &st) != nil {
				continue
			}
			id := libID{st.Dev, st.Ino}
			if _, done := d.libs[id]; done || d.failed[id] {
				continue
			}
			links, err := d.attach(path)
			if err != nil {
				d.failed[id] = true
				errs = append(errs, err)
				continue
			}
			d.libs[id] = links
		}
	}
	return errors.Join(errs...)
}

func (d *dnsHooks) attach(path string) ([]link.Link, error) {
	names := make([]string, len(resolverFuncs))
	for i, fn := range resolverFuncs {
		names[i] = fn.symbol
	}
	// Only these names are looked up: the library's symbols are never
	// loaded whole.
	offs, err := elfsym.Funcs(path, names, elfsym.Dynamic, elfsym.Static)
	if err != nil && !errors.Is(err, elfsym.ErrNoTable) {
		return nil, fmt.Errorf("proc: %s: %w", path, err)
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("proc: open %s: %w", path, err)
	}
	var links []link.Link
	for _, fn := range resolverFuncs {
		off, ok := offs[fn.symbol]
		if !ok {
			continue // not in this library (musl has no gethostbyname2 in old versions)
		}
		opts := &link.UprobeOptions{Address: off}
		enter, err := ex.Uprobe(fn.symbol, fn.enter(d.objs), opts)
		if err != nil {
			continue
		}
		ret, err := ex.Uretprobe(fn.symbol, d.objs.ProcDnsReturn, opts)
		if err != nil {
			enter.Close()
			continue
		}
		links = append(links, enter, ret)
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("proc: %s: no resolver function (getaddrinfo, gethostbyname) to probe", path)
	}
	return links, nil
}

func (d *dnsHooks) close() error {
	var errs []error
	for id, links := range d.libs {
		for _, l := range links {
			errs = append(errs, l.Close())
		}
		delete(d.libs, id)
	}
	return errors.Join(errs...)
}

// drainDNS returns the (process, name) rows counted since the last drain,
// and removes them.
func drainDNS(m *ebpf.Map) (map[procProcDnsKey]procProcDnsVal, error) {
	out := map[procProcDnsKey]procProcDnsVal{}
	err := bpfrt.TakeAll(m, func(k procProcDnsKey, v procProcDnsVal) { out[k] = v })
	return out, err
}

// domainOf is the name asked, up to its NUL.
func domainOf(k procProcDnsKey) string {
	b := make([]byte, 0, len(k.Domain))
	for _, c := range k.Domain {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// dnsRecords are the proc_dns rows of one period, and the events of the
// rows with errors (gala-gopher's "DNS error ratio" event, when report
// events are on). delay_avg and max_delay are over the successful calls
// (set only when one succeeded), in ns; error_ratio is a percentage.
func dnsRecords(rows map[procProcDnsKey]procProcDnsVal, events bool, end time.Time, period time.Duration) ([]*table.Record, []event.Event) {
	t := table.ProcDns
	var recs []*table.Record
	var evs []event.Event
	for k, v := range rows {
		if v.Count == 0 {
			continue
		}
		rec := t.NewRecord(end, period)
		rec.SetStr(t.MustIndex("tgid"), strconv.FormatUint(uint64(k.Tgid), 10))
		rec.SetStr(t.MustIndex("domain"), domainOf(k))
		if ok := v.Count - v.Errors; ok > 0 {
			rec.SetNum(t.MustIndex("delay_avg"), float64(v.NsSumOk)/float64(ok))
			rec.SetNum(t.MustIndex("max_delay"), float64(v.NsMaxOk))
		}
		ratio := float64(v.Errors) / float64(v.Count) * 100
		rec.SetNum(t.MustIndex("error_ratio"), ratio)
		rec.SetNum(t.MustIndex("count"), float64(v.Count))
		rec.SetNum(t.MustIndex("error_count"), float64(v.Errors))
		recs = append(recs, rec)
		if events && v.Errors > 0 {
			e := event.New(end, event.DNSErrorRatio, fmt.Sprintf("%d_%s", k.Tgid, domainOf(k)), int(k.Tgid), ratio)
			e.PID = int(k.Tgid)
			evs = append(evs, e)
		}
	}
	return recs, evs
}
