// Package symtab turns sampled instruction addresses into function names:
// user addresses through a process's /proc/<pid>/maps (file offset to ELF
// virtual address) and the mapped file's symbols, kernel addresses through
// /proc/kallsyms.
//
// Sources, in order: for Go binaries the .gopclntab line table (debug/gosym;
// it survives -ldflags=-s -w, so stripped Go binaries are named too), then
// the ELF .symtab, then .dynsym (all a stripped C library keeps). Files are
// opened through /proc/<pid>/root, so processes in containers are resolved
// against their own files, and each file's table is cached by device and
// inode. JIT code (anonymous memory) is named from a perf map
// (ParsePerfMap, the /tmp/perf-<pid>.map format) by the caller. Limits: no
// DWARF (inlined frames are named after the function they were inlined
// into), no separate debug files (/usr/lib/debug); an address with no
// symbol is named "<file>+0x<offset>", one in an anonymous mapping
// "[unknown]".
package symtab

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Unknown names an address that maps to no file.
const Unknown = "[unknown]"

// fileID identifies a mapped file independently of the name it was opened by.
type fileID struct{ dev, ino uint64 }

// Resolver names user and kernel addresses. It caches each file's symbol
// table and each process's mappings; call Forget when a process exits and
// Refresh when its mappings may have changed. Safe for concurrent use.
type Resolver struct {
	procRoot string // "/proc" normally

	mu     sync.Mutex
	files  map[fileID]*fileSyms
	procs  map[int][]Mapping
	kernel *Kallsyms
	kerr   error
	kdone  bool
}

// NewResolver resolves against procRoot ("/proc", or a host /proc mounted
// elsewhere).
func NewResolver(procRoot string) *Resolver {
	return &Resolver{procRoot: procRoot, files: map[fileID]*fileSyms{}, procs: map[int][]Mapping{}}
}

// Forget drops the cached mappings of pid.
func (r *Resolver) Forget(pid int) {
	r.mu.Lock()
	delete(r.procs, pid)
	r.mu.Unlock()
}

// Refresh re-reads the mappings of pid (after dlopen, or at each profile
// period). An exited process keeps its last mappings.
func (r *Resolver) Refresh(pid int) error {
	m, err := r.readMaps(pid)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.procs[pid] = m
	r.mu.Unlock()
	return nil
}

func (r *Resolver) readMaps(pid int) ([]Mapping, error) {
	f, err := os.Open(filepath.Join(r.procRoot, strconv.Itoa(pid), "maps"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseMaps(f)
}

// User names the user-space address pc of process pid.
func (r *Resolver) User(pid int, pc uint64) string {
	r.mu.Lock()
	maps, ok := r.procs[pid]
	r.mu.Unlock()
	if !ok {
		if err := r.Refresh(pid); err != nil {
			return Unknown
		}
		r.mu.Lock()
		maps = r.procs[pid]
		r.mu.Unlock()
	}
	m := findMapping(maps, pc)
	if m == nil {
		return Unknown
	}
	if m.Path == "" || m.Path[0] != '/' {
		if m.Path != "" && m.Path[0] == '[' {
			return m.Path // [vdso], [stack], [heap]
		}
		return Unknown
	}
	off := pc - m.Start + m.Offset
	fs := r.file(pid, m)
	if fs == nil {
		return fmt.Sprintf("%s+0x%x", path.Base(m.Path), off)
	}
	vaddr, ok := fs.fileOffsetToVaddr(off)
	if !ok {
		return fmt.Sprintf("%s+0x%x", path.Base(m.Path), off)
	}
	if name := fs.lookup(vaddr); name != "" {
		return name
	}
	return fmt.Sprintf("%s+0x%x", path.Base(m.Path), vaddr)
}

// file returns the symbol table of the file m maps, opened through the
// process's root; nil when it cannot be read.
func (r *Resolver) file(pid int, m *Mapping) *fileSyms {
	name := filepath.Join(r.procRoot, strconv.Itoa(pid), "root", m.Path)
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		// The file is gone (deleted or replaced): the map_files link
		// still reaches what is mapped.
		name = filepath.Join(r.procRoot, strconv.Itoa(pid), "map_files", fmt.Sprintf("%x-%x", m.Start, m.End))
		if err := syscall.Stat(name, &st); err != nil {
			return nil
		}
	}
	id := fileID{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs by arch
	r.mu.Lock()
	fs, ok := r.files[id]
	r.mu.Unlock()
	if ok {
		return fs
	}
	fs, err := loadFile(name)
	if err != nil {
		fs = nil
	}
	r.mu.Lock()
	r.files[id] = fs
	r.mu.Unlock()
	return fs
}

// Kernel names the kernel address pc from /proc/kallsyms (read once).
func (r *Resolver) Kernel(pc uint64) string {
	r.mu.Lock()
	if !r.kdone {
		r.kdone = true
		r.kernel, r.kerr = ReadKallsyms(filepath.Join(r.procRoot, "kallsyms"))
	}
	k := r.kernel
	r.mu.Unlock()
	if k == nil {
		return Unknown
	}
	return k.Lookup(pc)
}
