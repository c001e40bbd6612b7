package sli

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// ftrace is a tracefs instance of the test's own (instances/<name>): the
// kernel's event tracer, an observer independent of the probe, whose
// record of the same tracepoints is the ground truth some tests compare
// with. Its buffer is its own: other users of tracefs are not disturbed.
type ftrace struct{ dir string }

const tracefs = "/sys/kernel/tracing"

// newFtrace makes an instance recording events ("<system>/<event>") with
// the monotonic clock, not yet on; it is removed when the test ends.
func newFtrace(t *testing.T, events ...string) *ftrace {
	t.Helper()
	if _, err := os.Stat(filepath.Join(tracefs, "instances")); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("tracefs", tracefs, "tracefs", 0, ""); err != nil {
			t.Fatalf("mount tracefs: %v", err)
		}
	}
	f := &ftrace{dir: filepath.Join(tracefs, "instances", "galago-sli-"+strconv.Itoa(os.Getpid()))}
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.write(t, "tracing_on", "0")
		if err := os.Remove(f.dir); err != nil {
			t.Errorf("remove the tracefs instance: %v", err)
		}
	})
	f.write(t, "tracing_on", "0")
	f.write(t, "trace_clock", "mono")
	f.write(t, "buffer_size_kb", "2048")
	for _, e := range events {
		f.write(t, filepath.Join("events", e, "enable"), "1")
	}
	return f
}

func (f *ftrace) write(t *testing.T, file, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, file), []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *ftrace) on(t *testing.T)  { f.write(t, "tracing_on", "1") }
func (f *ftrace) off(t *testing.T) { f.write(t, "tracing_on", "0") }

// traceEvent is one line of an instance's trace.
type traceEvent struct {
	pid   int
	us    int64 // timestamp, µs (the trace prints µs)
	name  string
	attrs string
}

// lineRE: "<comm>-<pid> [<cpu>] <flags> <s>.<µs>: <event>: <attrs>"; a
// comm may hold spaces and dashes, so the pid is the last "-<digits>"
// before the CPU.
var lineRE = regexp.MustCompile(`^\s*.*-(\d+)\s+\[\d+\]\s+\S+\s+(\d+)\.(\d{6}): (\w+): ?(.*)$`)

// headerRE: the header's "entries-in-buffer/entries-written: <n>/<m>",
// equal when the buffer overwrote nothing.
var headerRE = regexp.MustCompile(`entries-in-buffer/entries-written: (\d+)/(\d+)`)

// events reads what the instance recorded; a lost event fails the test
// (the trace says so with a "LOST" line or in its header).
func (f *ftrace) events(t *testing.T) []traceEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	if m := headerRE.FindSubmatch(b); m == nil || !bytes.Equal(m[1], m[2]) {
		t.Fatalf("the trace's header does not say every event was kept: %q", m)
	}
	var out []traceEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if bytes.Contains([]byte(line), []byte("LOST")) {
			t.Fatalf("the trace lost events: %s", line)
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		s, _ := strconv.ParseInt(m[2], 10, 64)
		us, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, traceEvent{pid: pid, us: s*1e6 + us, name: m[4], attrs: m[5]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
