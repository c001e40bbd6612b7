package l7

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/galago-project/galago/internal/syscap"
)

// tlsScanInterval is how often processes are looked at for TLS libraries.
const tlsScanInterval = 2 * time.Second

// tlsScans is how many times a process's mappings are read: at first
// sight and once more a scan later (libraries loaded with dlopen after
// start).
const tlsScans = 2

// hostLibDirs are where a host's shared OpenSSL usually lives; the
// libraries found there are probed at start, so a process that starts
// later is covered from its first TLS call.
var hostLibDirs = []string{"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/local/lib64", "/usr/lib/*-linux-gnu", "/lib/*-linux-gnu"}

// procID is a process: its pid and start time (ticks), a reused pid is
// another process.
type procID struct {
	pid   int
	start string
}

// tlsAttacher attaches the capture's TLS uprobes to the OpenSSL and the Go
// crypto/tls every observed process uses: the host's libssl at start,
// then, for each process, the libssl files it maps (inside its container
// through /proc/<pid>/root) and its executable (OpenSSL linked
// statically, or a Go program). A process is looked at when a scan first
// sees it: its first TLS calls before that are not seen when its library
// is not the host's.
type tlsAttacher struct {
	capture *syscap.Capture
	root    string
	log     func(msg string, args ...any)
	seen    map[procID]int
}

func (a *tlsAttacher) attach(path string) {
	ok, err := a.capture.AttachOpenSSL(path)
	switch {
	case err != nil && !errors.Is(err, syscap.ErrNoOpenSSL) && !errors.Is(err, os.ErrNotExist):
		a.log("l7: TLS uprobes not attached", "file", path, "err", err)
	case ok:
		a.log("l7: TLS uprobes attached", "file", path, "library", "openssl")
	}
}

// attachGo probes a Go executable's crypto/tls.
func (a *tlsAttacher) attachGo(path string) {
	ok, err := a.capture.AttachGoTLS(path)
	switch {
	case err != nil && !errors.Is(err, syscap.ErrNotGoTLS) && !errors.Is(err, os.ErrNotExist):
		a.log("l7: Go TLS uprobes not attached", "file", path, "err", err)
	case ok:
		a.log("l7: TLS uprobes attached", "file", path, "library", "go crypto/tls")
	}
}

// attachHost probes the host's libssl files.
func (a *tlsAttacher) attachHost() {
	for _, dir := range hostLibDirs {
		matches, _ := filepath.Glob(filepath.Join(a.root, dir, "libssl.so*"))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
				a.attach(m)
			}
		}
	}
}

// scan looks at every observed process not yet scanned tlsScans times.
func (a *tlsAttacher) scan(observed func(int) bool) {
	ents, err := os.ReadDir(filepath.Join(a.root, "proc"))
	if err != nil {
		return
	}
	live := make(map[procID]bool, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !observed(pid) {
			continue
		}
		dir := filepath.Join(a.root, "proc", e.Name())
		id := procID{pid, startTime(dir)}
		live[id] = true
		if a.seen[id] >= tlsScans {
			continue
		}
		a.seen[id]++
		for _, lib := range sslMappings(dir) {
			a.attach(filepath.Join(dir, "root", lib))
		}
		if a.seen[id] == 1 {
			if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && !strings.HasSuffix(exe, " (deleted)") {
				a.attach(filepath.Join(dir, "root", exe))
				a.attachGo(filepath.Join(dir, "root", exe))
			}
		}
	}
	for id := range a.seen {
		if !live[id] {
			delete(a.seen, id)
		}
	}
}

// startTime is field 22 of /proc/<pid>/stat, "" if unreadable.
func startTime(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		if f := strings.Fields(string(b[i+1:])); len(f) > 19 {
			return f[19]
		}
	}
	return ""
}

// sslMappings are the libssl files a process maps (paths in its mount
// namespace).
func sslMappings(dir string) []string {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		p := line[i:]
		if base := filepath.Base(p); strings.HasPrefix(base, "libssl.so") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// tlsLoop attaches to the host's libraries, then scans processes every
// tlsScanInterval while support_ssl is on.
func (p *Probe) tlsLoop(ctx context.Context) error {
	p.mu.Lock()
	a := &tlsAttacher{capture: p.capture, root: p.root(), log: p.rt.Logger().Info, seen: map[procID]int{}}
	p.mu.Unlock()
	t := time.NewTicker(tlsScanInterval)
	defer t.Stop()
	on := false
	for {
		p.mu.Lock()
		want := p.cfg.Params.SupportSSL == 1
		targets := p.cfg.Targets
		p.mu.Unlock()
		switch {
		case want && !on:
			a.attachHost()
			on = true
		case !want && on:
			if err := p.capture.DetachTLS(); err != nil {
				return err
			}
			clear(a.seen)
			on = false
		}
		if on {
			a.scan(func(pid int) bool { return targets == nil || targets.Observed(pid) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.tlsKick:
		}
	}
}

func (p *Probe) root() string {
	if p.hostPath == "" {
		return "/"
	}
	return p.hostPath
}
