package proc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/probe/probetest"
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
	// dd's own pages (its binary, the C library, locale data) are loaded
	// by the dd that needs them first: run one before the probe starts, so
	// that the reader's loads are its file's.
	if out, err := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "count=1").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	reader, read := gatedDD(t, "if="+src+" bs=1M of=/dev/null")
	writer, write := gatedDD(t, "if=/dev/zero of="+dst+" bs="+strconv.Itoa(pg)+" count="+strconv.Itoa(writePages))
	const period = 500 * time.Millisecond
	p, rt := startFor(t, period, []int{reader.Process.Pid, writer.Process.Pid}, "proc_pagecache")
	read()
	write()
	of := func(pid int) func(*table.Record) bool {
		return func(r *table.Record) bool { return r.Str("tgid") == strconv.Itoa(pid) }
	}
	rt.WaitRecords(t, "both processes' pages", func(recs []*table.Record) bool {
		return sum(recs, table.ProcPage, "load_page_cache", of(reader.Process.Pid)) >= readPages &&
			sum(recs, table.ProcPage, "mark_page_dirty", of(writer.Process.Pid)) >= writePages
	})
	recs, _ := finish(t, p, rt, period)
	got := func(pid int, field string) float64 { return sum(recs, table.ProcPage, field, of(pid)) }
	rLoad, rDirty, rBuf := got(reader.Process.Pid, "load_page_cache"), got(reader.Process.Pid, "mark_page_dirty"), got(reader.Process.Pid, "mark_buffer_dirty")
	wLoad, wDirty, wBuf := got(writer.Process.Pid, "load_page_cache"), got(writer.Process.Pid, "mark_page_dirty"), got(writer.Process.Pid, "mark_buffer_dirty")
	t.Logf("reader: load %v dirty %v buffers %v; writer: load %v dirty %v buffers %v", rLoad, rDirty, rBuf, wLoad, wDirty, wBuf)
	// The reader loads exactly the file's pages and dirties only metadata
	// (atime): at most a few buffers, each of which may dirty (and, if the
	// kernel dropped it from the cache since the file was written, load)
	// one block-device page. (CI's 65 and 70 loads were dd's own pages,
	// cold after the earlier tests: 86 after drop_caches without the
	// warm-up dd above, 64 with it.)
	if rLoad < readPages || rLoad-readPages > rBuf || rBuf > 4 || rDirty > rBuf {
		t.Errorf("reader: load %v dirty %v buffers %v, want load %d + at most one per buffer, buffers <= 4, dirty pages <= buffers", rLoad, rDirty, rBuf, readPages)
	}
	// The writer adds each new page to the cache and dirties it and its
	// one buffer (block size = page size), plus the file system's metadata
	// buffers (inode, bitmaps, group descriptors: a handful), each of
	// which may dirty (and, if not cached, load) a block-device page.
	if wBuf < writePages || wBuf > writePages+16 {
		t.Errorf("writer mark_buffer_dirty = %v, want %d data buffers + at most 16 metadata", wBuf, writePages)
	}
	if wDirty < writePages || wDirty-writePages > wBuf-writePages {
		t.Errorf("writer mark_page_dirty = %v, want %d + at most one per metadata buffer (%v)", wDirty, writePages, wBuf-writePages)
	}
	if wLoad < writePages || wLoad-writePages > wBuf-writePages {
		t.Errorf("writer load_page_cache = %v, want %d + at most one per metadata buffer (%v)", wLoad, writePages, wBuf-writePages)
	}
	for _, r := range recs {
		if r.Table != table.ProcPage {
			t.Errorf("row of %s with only proc_pagecache on", r.Table.Name)
		}
	}
}
