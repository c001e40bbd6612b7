package exetrim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is Trim's error on a kernel without MADV_PAGEOUT.
var ErrUnsupported = errors.New("the kernel has no MADV_PAGEOUT (Linux 5.4+)")

// Mapping is one read-only mapping of the executable.
type Mapping struct{ Start, End uintptr }

// mapsLine is one line of /proc/<pid>/maps.
type mapsLine struct {
	start, end uintptr
	writable   bool
	file       string // major:minor inode, "" for no file
}

func parseMapsLine(b []byte) (mapsLine, bool) {
	// start-end perms offset major:minor inode [path]
	f := bytes.Fields(b)
	if len(f) < 5 || len(f[1]) < 4 {
		return mapsLine{}, false
	}
	lo, hi, ok := bytes.Cut(f[0], []byte("-"))
	if !ok {
		return mapsLine{}, false
	}
	start, err1 := strconv.ParseUint(string(lo), 16, 64)
	end, err2 := strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapsLine{}, false
	}
	l := mapsLine{start: uintptr(start), end: uintptr(end), writable: f[1][1] == 'w'}
	if !bytes.Equal(f[4], []byte("0")) {
		l.file = string(f[3]) + " " + string(f[4])
	}
	return l, true
}

// Mappings returns the read-only mappings of the file mapped at pc, from
// maps (the content of /proc/<pid>/maps). The file is named by the
// device and inode the mapping shows, not by a path: under overlayfs the
// executable's path and its mapped file's may differ.
func Mappings(maps []byte, pc uintptr) ([]Mapping, error) {
	var lines []mapsLine
	file := ""
	for line := range bytes.Lines(maps) {
		l, ok := parseMapsLine(line)
		if !ok {
			continue
		}
		if pc >= l.start && pc < l.end {
			file = l.file
		}
		lines = append(lines, l)
	}
	if file == "" {
		return nil, fmt.Errorf("exetrim: no file mapped at %#x", pc)
	}
	var out []Mapping
	for _, l := range lines {
		if l.file == file && !l.writable {
			out = append(out, Mapping{l.start, l.end})
		}
	}
	return out, nil
}

// Trim asks the kernel to reclaim the pages of the calling process's
// read-only executable mappings and returns how many bytes those
// mappings span.
func Trim() (int64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("exetrim: %w", err)
	}
	// an address of this package's code: the executable's text
	ms, err := Mappings(maps, reflect.ValueOf(Trim).Pointer())
	if err != nil {
		return 0, err
	}
	var n int64
	for _, m := range ms {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, unix.MADV_PAGEOUT); errno != 0 {
			if errno == unix.EINVAL {
				return n, ErrUnsupported
			}
			return n, fmt.Errorf("exetrim: madvise %#x-%#x: %w", m.Start, m.End, errno)
		}
		n += int64(m.End - m.Start)
	}
	return n, nil
}

// ResidentFile is the calling process's resident file-backed memory
// (bytes; /proc/self/statm's shared pages), 0 when unreadable.
func ResidentFile() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[2]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// DefaultQuiet is the daemon's wait after start-up or a probe change
// before it trims: a probe's start (BPF objects loaded, first walks) is
// over well within it.
const DefaultQuiet = 10 * time.Second

// Trimmer runs Trim a quiet wait after the latest Kick.
type Trimmer struct {
	quiet time.Duration
	log   *slog.Logger
	kick  chan struct{}
	trim  func() (int64, error)
}

// New returns a Trimmer that trims quiet after the latest kick and logs
// what it did to log.
func New(quiet time.Duration, log *slog.Logger) *Trimmer {
	return &Trimmer{quiet: quiet, log: log, kick: make(chan struct{}, 1), trim: Trim}
}

// Kick (re)starts the quiet wait; it never blocks.
func (t *Trimmer) Kick() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Run trims after each quiet wait until ctx is done or Trim fails.
func (t *Trimmer) Run(ctx context.Context) {
	timer := time.NewTimer(t.quiet)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
			timer.Reset(t.quiet)
		case <-timer.C:
			before := ResidentFile()
			n, err := t.trim()
			if err != nil {
				t.log.Info("the executable's pages are not returned to the kernel after start-up: RSS includes the ones start-up touched", "err", err)
				return
			}
			t.log.Debug("executable pages returned to the kernel", "mapped_bytes", n,
				"resident_file_bytes_before", before, "resident_file_bytes_after", ResidentFile())
		}
	}
}
