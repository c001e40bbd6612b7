package exetrim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const sampleMaps = `00400000-012b3000 r-xp 00000000 fe:00 10699801                           /usr/bin/galago
012b3000-023e7000 r--p 00eb3000 fe:00 10699801                           /usr/bin/galago
023e7000-0264e000 rw-p 01fe7000 fe:00 10699801                           /usr/bin/galago
0264e000-04670000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r--p 00000000 fe:01 10699801                   /other/fs/same-inode
7f0000200000-7f0000300000 r-xp 00010000 fe:00 4242                       /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`

func TestMappings(t *testing.T) {
	got, err := Mappings([]byte(sampleMaps), 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{{0x400000, 0x12b3000}, {0x12b3000, 0x23e7000}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Mappings = %#v, want the executable's two read-only mappings %#v", got, want)
	}
	// pc in libc: libc's mappings, whatever their path
	if got, _ := Mappings([]byte(sampleMaps), 0x7f0000200000); !reflect.DeepEqual(got, []Mapping{{0x7f0000200000, 0x7f0000300000}}) {
		t.Errorf("Mappings at libc = %#v", got)
	}
	for _, pc := range []uintptr{0xc000001000, 0x3fffff, 0x7ffd00000100} {
		if got, err := Mappings([]byte(sampleMaps), pc); err == nil {
			t.Errorf("Mappings at %#x (no file) = %#v, want an error", pc, got)
		}
	}
	if _, err := Mappings([]byte("garbage\n00400000 r-xp\n"), 0x400000); err == nil {
		t.Error("Mappings of unparsable lines: no error")
	}
}

// exeResident is the resident size of this test binary's read-only
// mappings, from /proc/self/smaps.
func exeResident(t *testing.T) int64 {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Mappings(maps, reflect.ValueOf(exeResident).Pointer())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if l, ok := parseMapsLine(line); ok {
			in = false
			for _, m := range ms {
				in = in || (m.Start == l.start && m.End == l.end)
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Rss:")); in && ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestTrim: on this kernel the test binary's resident code and read-only
// data shrink to what runs afterwards (reading smaps).
func TestTrim(t *testing.T) {
	before := exeResident(t)
	n, err := Trim()
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := exeResident(t)
	t.Logf("read-only mappings %d bytes; resident %d bytes before, %d after", n, before, after)
	if n <= 0 || before <= 0 || after*2 > before {
		t.Errorf("resident %d bytes before the trim, %d after: want at most half", before, after)
	}
}

func TestTrimmer(t *testing.T) {
	var mu sync.Mutex
	var calls []time.Time
	fail := false
	tr := New(50*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.trim = func() (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if fail {
			return 0, ErrUnsupported
		}
		return 1, nil
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	// kicks every 20 ms postpone the trim while they come
	start := time.Now()
	for range 10 {
		tr.Kick()
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d trims while kicked every 20 ms with a 50 ms quiet wait", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if count() != 1 || calls[0].Sub(start) < 200*time.Millisecond {
		t.Fatalf("trims %d, first after %v: want one after the kicks stopped", count(), time.Since(start))
	}
	// one trim per quiet wait, not a loop
	time.Sleep(150 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("%d trims without a kick, want 1", n)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	tr.Kick()
	select {
	case <-done: // an unsupported kernel stops the trimmer
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Trim failed")
	}
	cancel()
}
