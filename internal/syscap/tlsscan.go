package syscap

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

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
	start uint64
}

// TLSScanner attaches the capture's TLS uprobes to the OpenSSL and the Go
// crypto/tls every observed process uses: the host's libssl at start,
// then, for each process, the libssl files it maps (inside its container
// through /proc/<pid>/root) and its executable (OpenSSL linked
// statically, or a Go program). A process is looked at when a scan first
// sees it: its first TLS calls before that are not seen when its library
// is not the host's.
type TLSScanner struct {
	target TLSTarget
	root   string
	log    func(msg string, args ...any)
	seen   map[procID]int
	// exes are the executables already looked at: the processes of one
	// program (a PostgreSQL server's backends) cost one ELF read.
	exes map[fileID]bool
	// buf is reused for every /proc file read: a scan of the observed
	// processes every TLSScanInterval allocates nothing per process.
	buf []byte
}

// maxExes bounds TLSScanner.exes (forgotten, then filled again).
const maxExes = 4096

// TLSTarget is what a TLSScanner attaches to: a Capture, or a consumer
// of a Shared one.
type TLSTarget interface {
	AttachOpenSSL(path string) (bool, error)
	AttachGoTLS(path string) (bool, error)
}

// NewTLSScanner returns a scanner of the processes under root (the host
// path) that attaches to t and logs what it attached through log.
func NewTLSScanner(t TLSTarget, root string, log func(msg string, args ...any)) *TLSScanner {
	return &TLSScanner{target: t, root: root, log: log, seen: map[procID]int{}, exes: map[fileID]bool{}}
}

// Forget makes every process scanned again (after the uprobes were
// detached).
func (a *TLSScanner) Forget() {
	clear(a.seen)
	clear(a.exes)
}

func (a *TLSScanner) attach(path string) {
	ok, err := a.target.AttachOpenSSL(path)
	switch {
	case err != nil && !errors.Is(err, ErrNoOpenSSL) && !errors.Is(err, os.ErrNotExist):
		a.log("TLS uprobes not attached", "file", path, "err", err)
	case ok:
		a.log("TLS uprobes attached", "file", path, "library", "openssl")
	}
}

// attachExe probes an executable's OpenSSL and Go crypto/tls, once per
// file.
func (a *TLSScanner) attachExe(path string) {
	if id, err := fileIDOf(path); err == nil {
		if a.exes[id] {
			return
		}
		if len(a.exes) >= maxExes {
			clear(a.exes)
		}
		a.exes[id] = true
	}
	a.attach(path)
	a.attachGo(path)
}

// attachGo probes a Go executable's crypto/tls.
func (a *TLSScanner) attachGo(path string) {
	ok, err := a.target.AttachGoTLS(path)
	switch {
	case err != nil && !errors.Is(err, ErrNotGoTLS) && !errors.Is(err, os.ErrNotExist):
		a.log("Go TLS uprobes not attached", "file", path, "err", err)
	case ok:
		a.log("TLS uprobes attached", "file", path, "library", "go crypto/tls")
	}
}

// AttachHost probes the host's libssl files.
func (a *TLSScanner) AttachHost() {
	for _, dir := range hostLibDirs {
		matches, _ := filepath.Glob(filepath.Join(a.root, dir, "libssl.so*"))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
				a.attach(m)
			}
		}
	}
}

// Scan looks at every observed process not yet scanned tlsScans times.
func (a *TLSScanner) Scan(observed func(int) bool) {
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
		id := procID{pid, a.startTime(dir)}
		live[id] = true
		if a.seen[id] >= tlsScans {
			continue
		}
		a.seen[id]++
		for _, lib := range a.sslMappings(dir) {
			a.attach(filepath.Join(dir, "root", lib))
		}
		if a.seen[id] == 1 {
			if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && !strings.HasSuffix(exe, " (deleted)") {
				a.attachExe(filepath.Join(dir, "root", exe))
			}
		}
	}
	for id := range a.seen {
		if !live[id] {
			delete(a.seen, id)
		}
	}
}

// startTime is field 22 of /proc/<pid>/stat, 0 if unreadable. Every
// observed process's is read every scan, so it takes three system calls
// (open, one read: the kernel writes the whole file at once, close)
// where os.Open and io.ReadFull take seven to nine.
func (a *TLSScanner) startTime(dir string) uint64 {
	fd, err := unix.Open(filepath.Join(dir, "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	if a.buf == nil {
		a.buf = make([]byte, 4096)
	}
	n, err := unix.Read(fd, a.buf)
	unix.Close(fd)
	if err != nil || n == len(a.buf) {
		return 0
	}
	b := a.buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	// Fields after the command: state is field 3, starttime 22.
	b = b[i+1:]
	for field := 3; field < 22; field++ { // skip fields 3..21
		b = bytes.TrimLeft(b, " ")
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			return 0
		}
		b = b[j:]
	}
	b = bytes.TrimLeft(b, " ")
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + uint64(c-'0')
	}
	return v
}

// sslMappings are the libssl files a process maps (paths in its mount
// namespace).
func (a *TLSScanner) sslMappings(dir string) []string {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return nil
	}
	defer f.Close()
	if a.buf == nil {
		a.buf = make([]byte, 4096)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(a.buf, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		p := line[i:]
		if base := p[bytes.LastIndexByte(p, '/')+1:]; bytes.HasPrefix(base, []byte("libssl.so")) && !slices.Contains(out, string(p)) {
			out = append(out, string(p))
		}
	}
	return out
}
