package ioprobe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

// testPeriod is the report period of the privileged tests.
const testPeriod = 200 * time.Millisecond

// privileged gates the privileged tests on root and every hook of the
// hooks table (a missing one leaves fields unset, which must fail here).
func privileged(t *testing.T) {
	t.Helper()
	checks := []error{}
	for _, h := range hooks {
		checks = append(checks, bpfrt.HaveTPBTF(h.target))
	}
	probetest.RequireHooks(t, checks...)
}

// loopDev is a loop device over a file, attached with LOOP_CONFIGURE and
// detached at cleanup; node is a device node for it in the test's
// directory (no udev here to make /dev entries for new loop devices).
type loopDev struct {
	name string
	dev  Dev
	node string
}

func newLoop(t testing.TB, backing string, size int64) *loopDev {
	t.Helper()
	return newLoopWith(t, backing, size, false)
}

// newLoopWith is newLoop, with partitions allowed on the device when
// partitions is set (LO_FLAGS_PARTSCAN).
func newLoopWith(t testing.TB, backing string, size int64, partitions bool) *loopDev {
	t.Helper()
	f, err := os.OpenFile(backing, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("loop-control: %v", err)
	}
	defer unix.Close(ctl)
	dir := t.TempDir()
	// Another test may take the free device between GET_FREE and
	// CONFIGURE: then CONFIGURE fails with EBUSY and we ask again.
	for try := 0; try < 20; try++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatalf("LOOP_CTL_GET_FREE: %v", err)
		}
		name := fmt.Sprintf("loop%d", n)
		dev, err := readDev(filepath.Join("/sys/class/block", name, "dev"))
		if err != nil {
			t.Fatal(err)
		}
		node := filepath.Join(dir, name)
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(dev.Major, dev.Minor))); err != nil {
			t.Fatalf("mknod %s: %v", node, err)
		}
		lfd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", node, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		if partitions {
			cfg.Info.Flags |= unix.LO_FLAGS_PARTSCAN
		}
		copy(cfg.Info.File_name[:], "galago-io-test")
		err = unix.IoctlLoopConfigure(lfd, &cfg)
		if errors.Is(err, unix.EBUSY) {
			unix.Close(lfd)
			os.Remove(node)
			continue
		}
		if err != nil {
			unix.Close(lfd)
			t.Fatalf("LOOP_CONFIGURE %s: %v", name, err)
		}
		// AUTOCLEAR detaches the device when its last opener closes:
		// this descriptor, at cleanup.
		t.Cleanup(func() { unix.Close(lfd) })
		return &loopDev{name: name, dev: dev, node: node}
	}
	t.Fatal("no free loop device after 20 tries")
	return nil
}

// alignedBuf is a page-aligned buffer for O_DIRECT.
func alignedBuf(t testing.TB, n int, fill byte) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	for i := range b {
		b[i] = fill
	}
	return b
}

// directIO does writes then reads of size bytes each with O_DIRECT, at
// distinct offsets; it returns how many of each completed without error
// and the errno of each write that failed with an I/O error (EIO, or what
// the backing file returned: the loop driver passes ENOSPC on).
func directIO(t *testing.T, node string, writes, reads, size int) (okW, okR int, failed []unix.Errno) {
	t.Helper()
	fd, err := unix.Open(node, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := alignedBuf(t, size, 0x5a)
	for i := 0; i < writes; i++ {
		n, err := unix.Pwrite(fd, buf, int64(i*size))
		switch {
		case errors.Is(err, unix.EIO) || errors.Is(err, unix.ENOSPC):
			var errno unix.Errno
			errors.As(err, &errno)
			failed = append(failed, errno)
		case err != nil:
			t.Fatalf("write %d: %v", i, err)
		case n != size:
			t.Fatalf("write %d: %d bytes", i, n)
		default:
			okW++
		}
	}
	for i := 0; i < reads; i++ {
		n, err := unix.Pread(fd, buf, int64(i*size))
		if err != nil || n != size {
			t.Fatalf("read %d: %d bytes, %v", i, n, err)
		}
		okR++
	}
	return okW, okR, failed
}

func isDev(r *table.Record, d Dev) bool {
	return r.Str("major") == fmt.Sprint(d.Major) && r.Str("first_minor") == fmt.Sprint(d.Minor)
}

// sum adds field over the records of tbl for device d.
func sum(recs []*table.Record, tbl *table.Table, d Dev, field string) (float64, int) {
	i := tbl.MustIndex(field)
	var s float64
	n := 0
	for _, r := range recs {
		if r.Table == tbl && isDev(r, d) && r.Values[i].Set {
			s += r.Values[i].Num
			n++
		}
	}
	return s, n
}

func startProbe(t *testing.T, sub uint32, params probe.Params) (*Probe, *probetest.Runtime) {
	t.Helper()
	rt := probetest.NewRuntime(t)
	p := New(withInterval(testPeriod))
	if err := p.Start(rt.Context(), probe.Config{SubItems: sub, Params: params}, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	return p, rt
}

// settle waits a few periods so that every record of the I/O done so far
// is published, then returns everything published.
// inflight counts the entries of rq_inflight.
func inflight(t *testing.T, p *Probe) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var key uint64
	var v []byte
	n := 0
	it := p.coll.Maps["rq_inflight"].Iterate()
	for it.Next(&key, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// startOnLoop makes a loop device of size bytes and starts the probe with
// sub, dev_name selecting that device.
func startOnLoop(t *testing.T, size int64, sub uint32) (*loopDev, *Probe, *probetest.Runtime) {
	t.Helper()
	ld := newLoop(t, filepath.Join(t.TempDir(), "backing"), size)
	params := probe.DefaultParams()
	params.DevName = ld.name
	p, rt := startProbe(t, sub, params)
	return ld, p, rt
}

func settle(rt *probetest.Runtime) []*table.Record {
	time.Sleep(5 * testPeriod)
	return rt.Records()
}

// TestDirectIOPrivileged: O_DIRECT requests of a known size on a loop
// device the test owns, one request per syscall. io_count must hold exactly
// the bytes written and read, io_latency exactly one completed request per
// syscall in every stage, each stage's max ≥ its last, and the loop's names.
func TestDirectIOPrivileged(t *testing.T) {
	privileged(t)
	ld, _, rt := startOnLoop(t, 64<<20, bitTrace|bitErr|bitCount)

	const writes, reads, size = 40, 25, 16 << 10
	okW, okR, _ := directIO(t, ld.node, writes, reads, size)
	if okW != writes || okR != reads {
		t.Fatalf("%d writes, %d reads completed", okW, okR)
	}
	rt.WaitRecords(t, "all requests", func(recs []*table.Record) bool {
		n, _ := sum(recs, table.IoLatency, ld.dev, "count_latency_req")
		return n >= writes+reads
	})
	recs := settle(rt)
	for _, c := range []struct {
		tbl   *table.Table
		field string
		want  float64
	}{
		{table.IoCount, "write_bytes", writes * size},
		{table.IoCount, "read_bytes", reads * size},
		{table.IoLatency, "count_latency_req", writes + reads},
		{table.IoLatency, "count_latency_driver", writes + reads},
		{table.IoLatency, "count_latency_device", writes + reads},
	} {
		if got, _ := sum(recs, c.tbl, ld.dev, c.field); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.tbl.Name, c.field, got, c.want)
		}
	}
	for _, r := range recs {
		if !isDev(r, ld.dev) {
			t.Errorf("dev_name %s: record of another device: %s %s:%s", ld.name, r.Table.Name, r.Str("major"), r.Str("first_minor"))
			continue
		}
		if r.Str("blk_name") != ld.name || r.Str("disk_name") != ld.name {
			t.Errorf("%s names %q/%q, want %s", r.Table.Name, r.Str("blk_name"), r.Str("disk_name"), ld.name)
		}
		if r.Table == table.IoErr {
			t.Errorf("io_err row without errors: %+v", r.Values)
		}
		if r.Table != table.IoLatency {
			continue
		}
		for _, st := range []string{"req", "driver", "device"} {
			mx := r.Values[table.IoLatency.MustIndex("latency_"+st+"_max")].Num
			last := r.Values[table.IoLatency.MustIndex("latency_"+st+"_last")].Num
			s := r.Values[table.IoLatency.MustIndex("latency_"+st+"_sum")].Num
			n := r.Values[table.IoLatency.MustIndex("count_latency_"+st)].Num
			if mx <= 0 || last > mx || s < mx || s > mx*n {
				t.Errorf("stage %s: max %v last %v sum %v count %v", st, mx, last, s, n)
			}
		}
		// The request stage covers the other two.
		req := r.Values[table.IoLatency.MustIndex("latency_req_sum")].Num
		drv := r.Values[table.IoLatency.MustIndex("latency_driver_sum")].Num
		dev := r.Values[table.IoLatency.MustIndex("latency_device_sum")].Num
		if drv+dev != req {
			t.Errorf("driver %v + device %v != request %v", drv, dev, req)
		}
	}
	if lost := rt.LostCount(); lost != 0 {
		t.Errorf("%d events lost", lost)
	}
}

// TestDevNameFilterPrivileged: with two loop devices busy, dev_name selects
// one; a reconfiguration moves the selection to the other.
func TestDevNameFilterPrivileged(t *testing.T) {
	privileged(t)
	dir := t.TempDir()
	a := newLoop(t, filepath.Join(dir, "a"), 16<<20)
	b := newLoop(t, filepath.Join(dir, "b"), 16<<20)
	params := probe.DefaultParams()
	params.DevName = a.name
	p, rt := startProbe(t, bitTrace|bitCount, params)

	const n, size = 10, 8 << 10
	directIO(t, a.node, n, 0, size)
	directIO(t, b.node, n, 0, size)
	rt.WaitTable(t, table.IoCount, 1, func(r *table.Record) bool { return isDev(r, a.dev) })
	recs := settle(rt)
	if got, _ := sum(recs, table.IoCount, a.dev, "write_bytes"); got != n*size {
		t.Errorf("%s write_bytes %v, want %v", a.name, got, n*size)
	}
	if got, _ := sum(recs, table.IoLatency, a.dev, "count_latency_req"); got != n {
		t.Errorf("%s count_latency_req %v, want %v", a.name, got, n)
	}
	for _, r := range recs {
		if !isDev(r, a.dev) {
			t.Errorf("dev_name %s: %s row of %s:%s", a.name, r.Table.Name, r.Str("major"), r.Str("first_minor"))
		}
	}

	params.DevName = b.name
	if err := p.Reconfigure(probe.Config{SubItems: bitTrace | bitCount, Params: params}); err != nil {
		t.Fatal(err)
	}
	rt.Take()
	directIO(t, a.node, n, 0, size)
	directIO(t, b.node, 2*n, 0, size)
	rt.WaitTable(t, table.IoCount, 1, func(r *table.Record) bool { return isDev(r, b.dev) })
	recs = settle(rt)
	if got, _ := sum(recs, table.IoCount, b.dev, "write_bytes"); got != 2*n*size {
		t.Errorf("%s write_bytes %v, want %v", b.name, got, 2*n*size)
	}
	for _, r := range recs {
		if !isDev(r, b.dev) {
			t.Errorf("dev_name %s: %s row of %s:%s", b.name, r.Table.Name, r.Str("major"), r.Str("first_minor"))
		}
	}
}

// TestIOErrorPrivileged: a loop device over a file on a tmpfs too small for
// it; O_DIRECT writes past the tmpfs's size fail in the backing file and
// the loop driver completes those requests with the backing file's error
// as a blk_status_t. Every write that failed must be one error event with
// the reference's message naming the status of that errno, and the io_err
// rows must carry the negative errno.
func TestIOErrorPrivileged(t *testing.T) {
	privileged(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	ld := newLoop(t, filepath.Join(dir, "backing"), 16<<20)
	params := probe.DefaultParams()
	params.DevName = ld.name
	params.ReportEvent = 1
	_, rt := startProbe(t, bitErr|bitCount, params)

	const writes, size = 40, 16 << 10
	okW, _, failed := directIO(t, ld.node, writes, 0, size)
	eio := len(failed)
	if eio == 0 || okW == 0 {
		t.Fatalf("%d writes ok, %d failed: want both (tmpfs of 256k, %d bytes written)", okW, eio, writes*size)
	}
	// The status each errno comes from (blk_status_to_errno is one to one
	// on these).
	statusFor := func(e unix.Errno) (uint8, blkStatus) {
		for s, st := range blkStatuses {
			if st.errno == -int(e) {
				return s, st
			}
		}
		t.Fatalf("no blk_status_t for %v", e)
		return 0, blkStatus{}
	}
	probetest.WaitFor(t, "error events", func() bool { return len(rt.Events()) >= eio })
	recs := settle(rt)
	evs := rt.Events()
	if len(evs) != eio {
		t.Errorf("%d error events, want %d (writes that returned EIO)", len(evs), eio)
	}
	prefix := fmt.Sprintf("IO errors occurred.(Disk %s(%d:%d), COMM ", ld.name, ld.dev.Major, ld.dev.Minor)
	for i, e := range evs {
		want := event.Event{Entity: "block", EntityID: ld.dev.String(), Metric: "err_code", Device: ld.name, Severity: event.SeverityWarn}
		got := event.Event{Entity: e.Entity, EntityID: e.EntityID, Metric: e.Metric, Device: e.Device, Severity: e.Severity}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %+v, want %+v", got, want)
		}
		if i >= eio {
			break
		}
		// O_DIRECT writes are synchronous: REQ_SYNC, rwbs "WS".
		code, st := statusFor(failed[i])
		if !strings.HasPrefix(e.Message, prefix) || !strings.Contains(e.Message, fmt.Sprintf(", op: WS, datalen %d, blk_err(%d) '%s', scsi_err(0) 'UNKNOW', timestamp ", size, code, st.desc)) {
			t.Errorf("message %q", e.Message)
		}
		if e.PID != os.Getpid() {
			t.Errorf("event pid %d, want the test's %d", e.PID, os.Getpid())
		}
	}
	_, last := statusFor(failed[eio-1])
	var lastCode float64
	rows := 0
	for _, r := range recs {
		if r.Table == table.IoErr && isDev(r, ld.dev) {
			lastCode = r.Values[errCode].Num
			rows++
		}
	}
	if rows == 0 || lastCode != float64(last.errno) {
		t.Errorf("io_err: %d rows, last err_code %v, want %d", rows, lastCode, last.errno)
	}
	// Failed bios were submitted too: io_count counts what was asked.
	if got, _ := sum(recs, table.IoCount, ld.dev, "write_bytes"); got != writes*size {
		t.Errorf("write_bytes %v, want %v", got, writes*size)
	}
}

// TestPageCachePrivileged: buffered I/O on the loop device's own page
// cache with readahead off: reading N separate pages and writing M other
// whole pages inserts exactly N+M pages into the cache; the writes dirty
// exactly M pages and M buffers (4 KiB blocks: one buffer per page).
func TestPageCachePrivileged(t *testing.T) {
	privileged(t)
	ld, _, rt := startOnLoop(t, 16<<20, bitPage)

	fd, err := unix.Open(ld.node, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	const reads, writes, stride = 8, 6, 64 << 10
	page := make([]byte, os.Getpagesize())
	for i := 0; i < reads; i++ {
		if _, err := unix.Pread(fd, page, int64(i*stride)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < writes; i++ {
		if _, err := unix.Pwrite(fd, page, int64((reads+i)*stride)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	rt.WaitTable(t, table.IoPagecache, 1, func(r *table.Record) bool { return isDev(r, ld.dev) })
	recs := settle(rt)
	for _, c := range []struct {
		field string
		want  float64
	}{
		{"load_page_cache", reads + writes},
		{"mark_page_dirty", writes},
		{"mark_buffer_dirty", writes},
	} {
		if got, _ := sum(recs, table.IoPagecache, ld.dev, c.field); got != c.want {
			t.Errorf("%s = %v, want %v", c.field, got, c.want)
		}
	}
	i := table.IoPagecache.MustIndex("access_pagecache")
	for _, r := range recs {
		if r.Values[i].Set {
			t.Errorf("access_pagecache set (not measured): %v", r.Values[i].Num)
		}
	}
	if !strings.Contains(rt.Logs(), "mark_page_accessed") {
		t.Errorf("no log line about access_pagecache: %s", rt.Logs())
	}
}

// FIFREEZE and FITHAW (include/uapi/linux/fs.h: _IOWR('X', 119/120, int)),
// which x/sys/unix does not define.
const (
	fifreeze = 0xc0045877
	fithaw   = 0xc0045878
)

// TestLatencyEventPrivileged makes one request slow for real: loop device
// A's backing file lives on an ext4 file system on loop device B, which the
// test freezes (FIFREEZE) before an O_DIRECT write to A and thaws 150 ms
// later. The loop driver's write to the backing file waits for the thaw,
// so A's request takes at least that long after it was issued. latency_thr
// is 10 ms: exactly one latency event must name the test's write, and the
// io_latency row must hold that one request, no longer than the write
// syscall took.
func TestLatencyEventPrivileged(t *testing.T) {
	privileged(t)
	probetest.RequireTools(t, "mkfs.ext4")
	dir := t.TempDir()
	b := newLoop(t, filepath.Join(dir, "b"), 64<<20)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", b.node).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(b.node, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	a := newLoop(t, filepath.Join(mnt, "a"), 16<<20)

	params := probe.DefaultParams()
	params.DevName = a.name
	params.ReportEvent = 1
	params.LatencyThr = 10
	_, rt := startProbe(t, bitTrace, params)

	fsfd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fsfd)
	if err := unix.IoctlSetInt(fsfd, fifreeze, 0); err != nil {
		t.Fatalf("FIFREEZE: %v", err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := unix.IoctlSetInt(fsfd, fithaw, 0); err != nil {
				t.Errorf("FITHAW: %v", err)
			}
		}
	}
	defer thaw()
	const size = 16 << 10
	buf := alignedBuf(t, size, 0x33)
	took := make(chan time.Duration, 1)
	go func() {
		fd, err := unix.Open(a.node, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != nil {
			took <- -1
			return
		}
		defer unix.Close(fd)
		start := time.Now()
		if _, err := unix.Pwrite(fd, buf, 0); err != nil {
			took <- -1
			return
		}
		took <- time.Since(start)
	}()
	const frozen = 150 * time.Millisecond
	time.Sleep(frozen)
	thaw()
	d := <-took
	if d < 0 {
		t.Fatal("the write failed")
	}
	probetest.WaitFor(t, "a latency event", func() bool { return len(rt.Events()) > 0 })
	recs := settle(rt)
	evs := rt.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	e := evs[0]
	prefix := fmt.Sprintf("IO latency occurred.(Disk %s(%d:%d), COMM %s, PID %d, op: WS, datalen %d, drv_latency ", a.name, a.dev.Major, a.dev.Minor, e.Comm, os.Getpid(), size)
	if e.EntityID != a.dev.String() || e.Metric != "latency_req_max" || e.PID != os.Getpid() || !strings.HasPrefix(e.Message, prefix) {
		t.Errorf("event %+v\nwant message prefix %q", e, prefix)
	}
	if n, _ := sum(recs, table.IoLatency, a.dev, "count_latency_req"); n != 1 {
		t.Errorf("count_latency_req %v, want 1", n)
	}
	mx, _ := sum(recs, table.IoLatency, a.dev, "latency_req_max")
	dev, _ := sum(recs, table.IoLatency, a.dev, "latency_device_max")
	t.Logf("%s; latency_req_max %v ns, device %v ns, write syscall %v", e.Message, mx, dev, d)
	// Issued after the freeze, completed after the thaw: at least most of
	// the frozen time (the goroutine needs a moment to issue it), and never
	// longer than the syscall around it.
	if mx < float64(frozen*2/3) || mx > float64(d) || dev > mx || dev < float64(frozen*2/3) {
		t.Errorf("latency_req_max %v ns, device %v ns; frozen %v, write took %v", mx, dev, frozen, d)
	}
}

// TestFullMapsPrivileged: with the per-device maps shrunk to one entry and
// that entry taken by a device that does no I/O, every bio and every
// completed request of the test's device is refused by a full map, and
// each refusal is one lost event: exactly 2 per O_DIRECT write.
func TestFullMapsPrivileged(t *testing.T) {
	privileged(t)
	ld := newLoop(t, filepath.Join(t.TempDir(), "backing"), 16<<20)
	params := probe.DefaultParams()
	params.DevName = ld.name
	rt := probetest.NewRuntime(t)
	// The ghost entry of a latency map is emptied with it at the first
	// swap that takes that map out, and the map comes back with room at
	// the second: a long period keeps the writes well before that.
	const period = time.Second
	p := New(withInterval(period), withMaxDevs(1))
	if err := p.Start(rt.Context(), probe.Config{SubItems: bitTrace | bitCount, Params: params}, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	// A device number no disk has (major 4095, minor 1048575).
	ghost := uint32(1<<32 - 1)
	p.mu.Lock()
	perCPU := make([]ioIoCounts, ebpfPossibleCPUs(t))
	err := p.coll.Maps["dev_counts"].Put(ghost, perCPU)
	for _, m := range p.lat {
		if err == nil {
			err = m.Put(ghost, make([]ioIoLat, len(perCPU)))
		}
	}
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	const writes, size = 12, 8 << 10
	if okW, _, _ := directIO(t, ld.node, writes, 0, size); okW != writes {
		t.Fatalf("%d of %d writes", okW, writes)
	}
	probetest.WaitFor(t, "lost events", func() bool { return rt.LostCount() >= 2*writes })
	time.Sleep(period + period/5)
	recs := rt.Records()
	if lost := rt.LostCount(); lost != 2*writes {
		t.Errorf("%d lost events, want %d (one per bio, one per request)", lost, 2*writes)
	}
	for _, r := range recs {
		if isDev(r, ld.dev) {
			t.Errorf("%s row for a device the full maps refused", r.Table.Name)
		}
	}
}

func ebpfPossibleCPUs(t *testing.T) int {
	t.Helper()
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSubItemTogglePrivileged: io_trace off detaches the request hooks and
// forgets the requests in flight (a planted one included); on again, exactly the requests after it
// are counted, while io_count counted every phase.
func TestSubItemTogglePrivileged(t *testing.T) {
	privileged(t)
	ld := newLoop(t, filepath.Join(t.TempDir(), "backing"), 16<<20)
	params := probe.DefaultParams()
	params.DevName = ld.name
	p, rt := startProbe(t, bitTrace|bitCount, params)
	const n, size = 7, 4 << 10
	phase := func(sub uint32, writes int) []*table.Record {
		t.Helper()
		if err := p.Reconfigure(probe.Config{SubItems: sub, Params: params}); err != nil {
			t.Fatal(err)
		}
		settle(rt)
		rt.Take()
		directIO(t, ld.node, writes, 0, size)
		rt.WaitTable(t, table.IoCount, 1, func(r *table.Record) bool { return isDev(r, ld.dev) })
		return settle(rt)
	}
	recs := phase(bitTrace|bitCount, n)
	if got, _ := sum(recs, table.IoLatency, ld.dev, "count_latency_req"); got != n {
		t.Errorf("phase 1: %v requests, want %d", got, n)
	}
	// A request whose completion was never seen (an address no request
	// has): turning io_trace off must forget it.
	p.mu.Lock()
	err := p.coll.Maps["rq_inflight"].Put(uint64(0xdead0000), ioIoInflight{IssueNs: 1})
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	recs = phase(bitCount, 2*n)
	if _, rows := sum(recs, table.IoLatency, ld.dev, "count_latency_req"); rows != 0 {
		t.Errorf("phase 2: %d io_latency rows with io_trace off", rows)
	}
	if got, _ := sum(recs, table.IoCount, ld.dev, "write_bytes"); got != 2*n*size {
		t.Errorf("phase 2: write_bytes %v, want %v", got, 2*n*size)
	}
	if left := inflight(t, p); left != 0 {
		t.Errorf("%d requests still in rq_inflight after io_trace was turned off", left)
	}
	recs = phase(bitTrace|bitCount, 3*n)
	if got, _ := sum(recs, table.IoLatency, ld.dev, "count_latency_req"); got != 3*n {
		t.Errorf("phase 3: %v requests, want %d", got, 3*n)
	}
	if got, _ := sum(recs, table.IoCount, ld.dev, "write_bytes"); got != 3*n*size {
		t.Errorf("phase 3: write_bytes %v, want %v", got, 3*n*size)
	}
}

// TestUnseenCompletionPrivileged: requests whose completions no program
// sees (block_rq_complete detached, as the kernel skips its programs in
// some softirqs) are counted lost when their addresses are issued again:
// every request issued from then on either waits in rq_inflight or was
// counted, exactly.
func TestUnseenCompletionPrivileged(t *testing.T) {
	privileged(t)
	ld, p, rt := startOnLoop(t, 16<<20, bitTrace)
	// More requests than the queue has tags (loop: 128 by default), so
	// addresses come back.
	const writes, size = 600, 4 << 10
	if okW, _, _ := directIO(t, ld.node, 4, 0, size); okW != 4 {
		t.Fatalf("%d of 4 writes", okW)
	}
	settle(rt)
	p.mu.Lock()
	_, err := p.links.Set("io_rq_complete", false, nil)
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	before := inflight(t, p)
	if before != 0 || rt.LostCount() != 0 {
		t.Fatalf("before: %d requests in flight, %d lost", before, rt.LostCount())
	}
	if okW, _, _ := directIO(t, ld.node, writes, 0, size); okW != writes {
		t.Fatalf("%d of %d writes", okW, writes)
	}
	waiting := inflight(t, p)
	want := uint64(writes - waiting)
	if want == 0 {
		t.Fatalf("%d writes took %d request addresses: none issued twice", writes, waiting)
	}
	probetest.WaitFor(t, "lost events", func() bool { return rt.LostCount() >= want })
	settle(rt)
	if lost := rt.LostCount(); lost != want {
		t.Errorf("%d lost, want %d: %d requests issued, %d still in rq_inflight", lost, want, writes, waiting)
	}
}

// addPartition adds partition 1 of length bytes at start to the device
// with BLKPG (this kernel has no partition table parsers).
func addPartition(t *testing.T, node string, start, length int64) {
	t.Helper()
	fd, err := unix.Open(node, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	part := unix.BlkpgPartition{Start: start, Length: length, Pno: 1}
	arg := unix.BlkpgIoctlArg{Op: unix.BLKPG_ADD_PARTITION, Datalen: int32(unsafe.Sizeof(part)), Data: (*byte)(unsafe.Pointer(&part))}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKPG, uintptr(unsafe.Pointer(&arg)))
	runtime.KeepAlive(&part)
	if errno != 0 {
		t.Fatalf("BLKPG_ADD_PARTITION: %v", errno)
	}
}

// TestPartitionPrivileged: a partitioned loop device. I/O on the partition
// is counted (io_count) under the partition, named with its disk, and its
// requests under the disk (io_latency); dev_name naming the disk selects
// both, naming the partition selects its io_count only.
func TestPartitionPrivileged(t *testing.T) {
	privileged(t)
	ld := newLoopWith(t, filepath.Join(t.TempDir(), "backing"), 32<<20, true)
	addPartition(t, ld.node, 1<<20, 8<<20)
	part := ld.name + "p1"
	var pdev Dev
	probetest.WaitFor(t, "the partition in sysfs", func() bool {
		d, err := readDev(filepath.Join("/sys/class/block", part, "dev"))
		pdev = d
		return err == nil
	})
	pnode := filepath.Join(filepath.Dir(ld.node), part)
	if err := unix.Mknod(pnode, unix.S_IFBLK|0o600, int(unix.Mkdev(pdev.Major, pdev.Minor))); err != nil {
		t.Fatal(err)
	}
	params := probe.DefaultParams()
	params.DevName = ld.name
	p, rt := startProbe(t, bitTrace|bitCount, params)
	const n, size = 9, 8 << 10
	directIO(t, pnode, n, 0, size)
	rt.WaitTable(t, table.IoCount, 1, func(r *table.Record) bool { return isDev(r, pdev) })
	recs := settle(rt)
	if got, _ := sum(recs, table.IoCount, pdev, "write_bytes"); got != n*size {
		t.Errorf("%s write_bytes %v, want %v", part, got, n*size)
	}
	if got, _ := sum(recs, table.IoLatency, ld.dev, "count_latency_req"); got != n {
		t.Errorf("%s count_latency_req %v, want %v", ld.name, got, n)
	}
	for _, r := range recs {
		want := [2]string{ld.name, ld.name}
		if isDev(r, pdev) {
			want[0] = part
		} else if !isDev(r, ld.dev) {
			t.Errorf("%s row of %s:%s", r.Table.Name, r.Str("major"), r.Str("first_minor"))
			continue
		}
		if got := [2]string{r.Str("blk_name"), r.Str("disk_name")}; got != want {
			t.Errorf("%s names %v, want %v", r.Table.Name, got, want)
		}
		if r.Table == table.IoCount && !isDev(r, pdev) {
			t.Errorf("io_count row of the disk itself: %v", r.Values)
		}
	}

	params.DevName = part
	if err := p.Reconfigure(probe.Config{SubItems: bitTrace | bitCount, Params: params}); err != nil {
		t.Fatal(err)
	}
	settle(rt)
	rt.Take()
	directIO(t, pnode, n, 0, size)
	rt.WaitTable(t, table.IoCount, 1, func(r *table.Record) bool { return isDev(r, pdev) })
	recs = settle(rt)
	if got, _ := sum(recs, table.IoCount, pdev, "write_bytes"); got != n*size {
		t.Errorf("dev_name %s: write_bytes %v, want %v", part, got, n*size)
	}
	for _, r := range recs {
		if !isDev(r, pdev) {
			t.Errorf("dev_name %s: %s row of %s:%s", part, r.Table.Name, r.Str("major"), r.Str("first_minor"))
		}
	}
}
