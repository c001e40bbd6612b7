// Package uprobes attaches sets of uprobes to the ELF files the observed
// processes map (a libc, a python interpreter), found through
// /proc/<pid>/maps and reached through /proc/<pid>/root, so processes in
// containers are probed in their own file. A file reached by two paths is
// probed once (by device and inode). A Set attaches either once per file
// (every process mapping it runs the programs, which filter in the
// kernel) or once per file and process (uprobes limited to that pid:
// nothing else on the machine pays for them).
package uprobes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Probe is one uprobe or uretprobe of a file.
type Probe struct {
	// Symbol is the function probed; with Address set it only names the
	// probe.
	Symbol string
	// Address is a file offset to probe instead of Symbol's (USDT).
	Address uint64
	// RefCtr is the file offset of a USDT semaphore (0: none), which the
	// kernel counts up while the probe is attached.
	RefCtr uint64
	Prog   *ebpf.Program
	Ret    bool
	// Optional: a file without Symbol, or where its probe cannot be
	// attached, skips every probe of that symbol (reported to Info when
	// the symbol is there).
	Optional bool
	// Cookie is what bpf_get_attach_cookie returns in the program.
	Cookie uint64
}

// Set is the uprobes of one kind of file.
type Set struct {
	// Root is the host root: processes are read under <Root>/proc.
	Root string
	// Match tells the files to probe by base name.
	Match func(base string) bool
	// Probes are the probes of a file, attached in order (return probes
	// first, so a call whose entry was seen has its return seen); the
	// path is the file's, for probes read from the file (USDT notes).
	Probes func(path string) ([]Probe, error)
	// PerProcess limits each file's uprobes to the observed processes.
	PerProcess bool
	// Multi attaches each run of probes of one program as one
	// uprobe_multi link (Linux 6.6): its removal waits for the kernel's
	// grace period once, where each single uprobe waits its own (about
	// 0.1 s each on a loaded machine). Every probe of a run must attach
	// (Optional is not looked at) and have an Address.
	Multi bool
	// Warn and Info report what could not be probed.
	Warn, Info func(msg string, args ...any)

	files map[fileKey][]link.Link
	seen  map[int]bool // processes whose files are probed (or have none)
}

// fileKey is a file by device and inode, and the process when PerProcess.
type fileKey struct{ dev, ino, pid uint64 }

func (s *Set) init() {
	if s.files == nil {
		s.files, s.seen = map[fileKey][]link.Link{}, map[int]bool{}
	}
}

// AttachHost probes the files matching base under the host's dirs (glob
// patterns), so a process that starts later is seen from its start. Not
// for PerProcess sets.
func (s *Set) AttachHost(dirs []string, base string) {
	s.init()
	for _, dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(s.Root, dir, base))
		for _, m := range matches {
			if err := s.Attach(m, 0); err != nil {
				s.Warn("uprobes not attached", "file", m, "err", err)
			}
		}
	}
}

// Scan probes the files of every observed process not seen before, and
// forgets the processes gone (detaching their probes when PerProcess).
func (s *Set) Scan(observed func(int) bool) {
	s.init()
	ents, err := os.ReadDir(filepath.Join(s.Root, "proc"))
	if err != nil {
		return
	}
	live := make(map[int]bool, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !observed(pid) {
			continue
		}
		live[pid] = true
		if s.seen[pid] {
			continue
		}
		s.seen[pid] = true
		dir := filepath.Join(s.Root, "proc", e.Name())
		files, mapped := Mappings(dir, s.Match)
		if len(files) == 0 && mapped {
			s.Info("the process maps no file to probe", "pid", pid)
		}
		for _, f := range files {
			// The path in the process's own mount namespace.
			if err := s.Attach(filepath.Join(dir, "root", f), pid); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.Warn("uprobes not attached", "pid", pid, "file", f, "err", err)
			}
		}
	}
	for pid := range s.seen {
		if !live[pid] {
			delete(s.seen, pid)
		}
	}
	if !s.PerProcess {
		return
	}
	for k, links := range s.files {
		if !live[int(k.pid)] {
			closeLinks(links)
			delete(s.files, k)
		}
	}
}

// Attach probes one file (once per file, or per file and pid when
// PerProcess).
func (s *Set) Attach(path string, pid int) error {
	s.init()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	id := fileKey{dev: uint64(st.Dev), ino: st.Ino} //nolint:unconvert // Dev's type differs by arch
	if s.PerProcess {
		id.pid = uint64(pid)
	}
	if _, done := s.files[id]; done {
		return nil
	}
	fail := func(err error) error {
		s.files[id] = nil // not retried: the same file fails the same way
		return err
	}
	probes, err := s.Probes(path)
	if err != nil {
		return fail(err)
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fail(err)
	}
	if s.Multi {
		links, err := attachMulti(ex, probes, pid, s.PerProcess)
		if err != nil {
			return fail(err)
		}
		s.files[id] = links
		return nil
	}
	var links []link.Link
	missing := map[string]bool{}
	for _, pr := range probes {
		if missing[pr.Symbol] {
			continue
		}
		opts := &link.UprobeOptions{Address: pr.Address, RefCtrOffset: pr.RefCtr, Cookie: pr.Cookie}
		if s.PerProcess {
			opts.PID = pid
		}
		attach, kind := ex.Uprobe, "uprobe"
		if pr.Ret {
			attach, kind = ex.Uretprobe, "uretprobe"
		}
		l, err := attach(pr.Symbol, pr.Prog, opts)
		if pr.Optional && err != nil {
			missing[pr.Symbol] = true
			if !errors.Is(err, link.ErrNoSymbol) {
				s.Info("probe left out", "file", path, "symbol", pr.Symbol, "err", err)
			}
			continue
		}
		if err != nil {
			closeLinks(links)
			return fail(fmt.Errorf("%s %s: %w", kind, pr.Symbol, err))
		}
		links = append(links, l)
	}
	s.files[id] = links
	return nil
}

// attachMulti attaches each run of probes of one program and direction
// as one uprobe_multi link.
func attachMulti(ex *link.Executable, probes []Probe, pid int, perProcess bool) ([]link.Link, error) {
	var links []link.Link
	for i := 0; i < len(probes); {
		j := i
		opts := &link.UprobeMultiOptions{}
		if perProcess {
			opts.PID = uint32(pid)
		}
		var refs bool
		for ; j < len(probes) && probes[j].Prog == probes[i].Prog && probes[j].Ret == probes[i].Ret; j++ {
			opts.Addresses = append(opts.Addresses, probes[j].Address)
			opts.Cookies = append(opts.Cookies, probes[j].Cookie)
			opts.RefCtrOffsets = append(opts.RefCtrOffsets, probes[j].RefCtr)
			refs = refs || probes[j].RefCtr != 0
		}
		if !refs {
			opts.RefCtrOffsets = nil
		}
		attach, kind := ex.UprobeMulti, "uprobe.multi"
		if probes[i].Ret {
			attach, kind = ex.UretprobeMulti, "uretprobe.multi"
		}
		l, err := attach(nil, probes[i].Prog, opts)
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("%s %s..%s: %w", kind, probes[i].Symbol, probes[j-1].Symbol, err)
		}
		links = append(links, l)
		i = j
	}
	return links, nil
}

// Close removes every uprobe, in the reverse order of their attachment
// (entries before returns).
func (s *Set) Close() {
	for _, links := range s.files {
		closeLinks(links)
	}
	clear(s.files)
	clear(s.seen)
}

// Files is the number of files (or file and process pairs) probed.
func (s *Set) Files() int {
	n := 0
	for _, l := range s.files {
		if len(l) > 0 {
			n++
		}
	}
	return n
}

func closeLinks(links []link.Link) {
	for i := len(links) - 1; i >= 0; i-- {
		_ = links[i].Close()
	}
}

// Mappings are the files a process maps whose base name match accepts
// (paths in its mount namespace). mapped tells whether the process maps
// any file (a kernel thread maps none).
func Mappings(dir string, match func(base string) bool) (out []string, mapped bool) {
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		mapped = mapped || i >= 0
		if i < 0 {
			continue
		}
		p := strings.TrimSuffix(line[i:], " (deleted)")
		if match(filepath.Base(p)) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, mapped
}

// IsLibc tells glibc's libc.so.6 or an older libc-2.x.so.
func IsLibc(base string) bool {
	return base == "libc.so.6" || (strings.HasPrefix(base, "libc-") && strings.HasSuffix(base, ".so"))
}
