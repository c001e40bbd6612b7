package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

// TestPrivilegedPageCache: one dd reads a file of known pages that is not
// in the page cache, another writes a new file of known pages: each
// page is loaded (and dirtied) once, by the process that caused it.
func TestPrivilegedPageCache(t *testing.T) {
	probetest.RequireTools(t, "dd", "sh")
	probetest.RequireHooks(t, bpfrt.HaveTPBTF("mm_filemap_add_to_page_cache"), bpfrt.HaveTPBTF("writeback_dirty_folio"),
		bpfrt.HaveTPBTF("block_dirty_buffer"))
	const readPages, writePages = 64, 32
	pg := os.Getpagesize()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{3}, readPages*pg)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // clean pages can be dropped
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	f.Close()
	reader, read := gatedDD(t, "if="+src+" bs=1M of=/dev/null")
	writer, write := gatedDD(t, "if=/dev/zero of="+dst+" bs="+strconv.Itoa(pg)+" count="+strconv.Itoa(writePages))
	p := New(withPeriod(500 * time.Millisecond))
	rt := probetest.NewRuntime(t)
	bit, _ := probe.LookupBuiltin(Name).SubItemBit("proc_pagecache")
	cfg := probe.Config{SubItems: bit, Params: probe.DefaultParams(),
		Targets: probetest.NewTargets(snoop.Whitelist, reader.Process.Pid, writer.Process.Pid)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	read()
	write()
	of := func(pid int) func(*table.Record) bool {
		return func(r *table.Record) bool { return r.Str("tgid") == strconv.Itoa(pid) }
	}
	rt.WaitRecords(t, "both processes' pages", func(recs []*table.Record) bool {
		return sum(recs, table.ProcPage, "load_page_cache", of(reader.Process.Pid)) >= readPages &&
			sum(recs, table.ProcPage, "mark_page_dirty", of(writer.Process.Pid)) >= writePages
	})
	time.Sleep(600 * time.Millisecond) // one more period: nothing more may come
	rt.Shutdown(t, p)
	recs, _ := rt.Take()
	for _, c := range []struct {
		pid   int
		field string
		want  float64
	}{
		{reader.Process.Pid, "load_page_cache", readPages}, {reader.Process.Pid, "mark_page_dirty", 0},
		// A buffered write adds the new page to the cache, then dirties it.
		{writer.Process.Pid, "load_page_cache", writePages}, {writer.Process.Pid, "mark_page_dirty", writePages},
	} {
		if got := sum(recs, table.ProcPage, c.field, of(c.pid)); got != c.want {
			t.Errorf("pid %d %s = %v, want %v", c.pid, c.field, got, c.want)
		}
	}
	// Buffers: the writer dirties each new page's one buffer (block size =
	// page size) plus the file system's metadata buffers (inode, bitmaps,
	// group descriptors: a handful); the reader only metadata (atime).
	if got := sum(recs, table.ProcPage, "mark_buffer_dirty", of(writer.Process.Pid)); got < writePages || got > writePages+16 {
		t.Errorf("writer mark_buffer_dirty = %v, want %d data buffers + at most 16 metadata", got, writePages)
	}
	if got := sum(recs, table.ProcPage, "mark_buffer_dirty", of(reader.Process.Pid)); got > 4 {
		t.Errorf("reader mark_buffer_dirty = %v, want at most 4 metadata buffers", got)
	}
	for _, r := range recs {
		if r.Table != table.ProcPage {
			t.Errorf("row of %s with only proc_pagecache on", r.Table.Name)
		}
	}
	if n := rt.LostCount(); n != 0 {
		t.Errorf("lost %d", n)
	}
}
