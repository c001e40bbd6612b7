package proc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/childtest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// gatedDD starts dd behind a shell that waits for one line on stdin and
// then execs it (same pid), so it can be observed from its first I/O.
func gatedDD(t *testing.T, args string) (*exec.Cmd, func()) {
	t.Helper()
	c := childtest.Start(t, exec.Command("sh", "-c", "read x; exec dd "+args+" 2>/dev/null"), childtest.Name("dd "+args))
	return c.Cmd, func() {
		c.Send(t, "")
		c.Exit(t)
	}
}

// TestPrivilegedBio: direct I/O of known sizes on the package's block-backed
// file system, by two dd processes: each bio is counted once, by direction
// and size class, for the process that submitted it.
func TestPrivilegedBio(t *testing.T) {
	probetest.RequireTools(t, "dd", "sh")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("block_bio_queue"), bpfrt.HaveTPBTF("block_bio_complete"), bpfrt.HaveTPBTF("block_rq_complete"))
	dir, err := os.MkdirTemp(".", "bio-") // on a block device, not tmpfs
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path, _ := filepath.Abs(filepath.Join(dir, "f"))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{7}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // clean: direct I/O flushes nothing
		t.Fatal(err)
	}
	f.Close()
	readArgs := "if=" + path + " iflag=direct bs=8192 count=3 of=/dev/null"
	writeArgs := "if=/dev/zero of=" + path + " oflag=direct conv=notrunc,nocreat bs=4096 count=5"
	// Both commands once, unobserved: dd's binary, its libraries and
	// locale files, and the file's metadata are then in the cache, so the
	// observed runs submit only their direct I/O.
	for _, args := range []string{readArgs, writeArgs} {
		if out, err := exec.Command("sh", "-c", "exec dd "+args).CombinedOutput(); err != nil {
			t.Fatalf("dd %s: %v: %s", args, err, out)
		}
	}
	reader, read := gatedDD(t, readArgs)
	writer, write := gatedDD(t, writeArgs)
	const period = 500 * time.Millisecond
	p, rt := startFor(t, period, []int{reader.Process.Pid, writer.Process.Pid}, "proc_io")
	// The kernel's own count of the bytes each process's read bios asked
	// for (submit_bio adds them to read_bytes; ru_inblock is it in
	// 512-byte units): what the two processes read besides dd's direct
	// I/O (a metadata block the file system fetched on their behalf, e.g.
	// for an atime update) is known, not guessed.
	rb0 := map[int]int64{reader.Process.Pid: readBytes(t, reader.Process.Pid), writer.Process.Pid: readBytes(t, writer.Process.Pid)}
	start := time.Now()
	read()
	write()
	extra := func(c *exec.Cmd, direct int64) int64 {
		return c.ProcessState.SysUsage().(*syscall.Rusage).Inblock*512 - rb0[c.Process.Pid] - direct
	}
	small := map[int]int64{reader.Process.Pid: extra(reader, 3*8192), writer.Process.Pid: extra(writer, 0)}
	wall := time.Since(start)
	of := func(pid int) func(*table.Record) bool {
		return func(r *table.Record) bool { return r.Str("tgid") == strconv.Itoa(pid) }
	}
	rt.WaitRecords(t, "both processes' bios", func(recs []*table.Record) bool {
		return sum(recs, table.ProcIo, "greater_4k_io_read", of(reader.Process.Pid)) >= 3 &&
			sum(recs, table.ProcIo, "less_4k_io_write", of(writer.Process.Pid)) >= 5
	})
	recs, _ := finish(t, p, rt, period)
	for _, c := range []struct {
		pid   int
		field string
		want  float64
	}{
		{reader.Process.Pid, "greater_4k_io_read", 3}, {reader.Process.Pid, "less_4k_io_read", 0},
		{reader.Process.Pid, "greater_4k_io_write", 0}, {reader.Process.Pid, "less_4k_io_write", 0},
		{writer.Process.Pid, "less_4k_io_write", 5}, {writer.Process.Pid, "greater_4k_io_write", 0},
		{writer.Process.Pid, "greater_4k_io_read", 0},
		{reader.Process.Pid, "bio_err_count", 0}, {writer.Process.Pid, "bio_err_count", 0},
	} {
		if got := sum(recs, table.ProcIo, c.field, of(c.pid)); got != c.want {
			t.Errorf("pid %d %s = %v, want %v", c.pid, c.field, got, c.want)
		}
	}
	// Reads of 4 KiB or less: none when the kernel counted no bytes
	// beyond the direct ones, else as many as those bytes can make (each
	// between 512 bytes and 4 KiB).
	for pid, b := range small {
		n := int64(sum(recs, table.ProcIo, "less_4k_io_read", of(pid)))
		if (b == 0 && n != 0) || (b != 0 && (n == 0 || b < n*512 || b > n*4096)) {
			t.Errorf("pid %d less_4k_io_read = %d, the kernel counted %d read bytes besides its direct reads", pid, n, b)
		}
	}
	lat := table.ProcIo.MustIndex("bio_latency")
	for _, pid := range []int{reader.Process.Pid, writer.Process.Pid} {
		n := 0
		for _, r := range recs {
			if r.Table != table.ProcIo || !of(pid)(r) || !r.Values[lat].Set {
				continue
			}
			n++
			if v := time.Duration(r.Values[lat].Num); v <= 0 || v > wall {
				t.Errorf("pid %d bio_latency %v, want in (0, %v]", pid, v, wall)
			}
		}
		if n == 0 {
			t.Errorf("pid %d: no bio_latency", pid)
		}
	}
}

// readBytes is read_bytes of /proc/<pid>/io: the bytes of the read bios
// the process submitted.
func readBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "read_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/io: %q", pid, l)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/io has no read_bytes", pid)
	return 0
}
