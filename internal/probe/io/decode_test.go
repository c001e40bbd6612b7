package ioprobe

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// rawRec lays out one struct io_rec by hand, byte by byte, as the kernel
// writes it (little endian).
func rawRec(start, issue, done uint64, dev, pid, dataLen uint32, kind, op, flags, status uint8, comm string) []byte {
	b := make([]byte, recSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], start)
	le.PutUint64(b[8:], issue)
	le.PutUint64(b[16:], done)
	le.PutUint32(b[24:], dev)
	le.PutUint32(b[28:], pid)
	le.PutUint32(b[32:], dataLen)
	b[36], b[37], b[38], b[39] = kind, op, flags, status
	copy(b[40:], comm)
	return b
}

func TestDecodeRequest(t *testing.T) {
	raw := rawRec(1000, 1500, 4000, 7<<20|3, 42, 16384, 3, opWrite, uint8(ioIoReqFlagIO_F_SYNC), 10, "dd")
	r, err := DecodeRequest(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Disk: Dev{7, 3}, StartNs: 1000, IssueNs: 1500, DoneNs: 4000, PID: 42, Comm: "dd", DataLen: 16384,
		Latency: true, Error: true, Op: opWrite, Flags: uint8(ioIoReqFlagIO_F_SYNC), Status: 10}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	if v, ok := r.reqLatency(); !ok || v != 3000 {
		t.Errorf("request stage %d %v", v, ok)
	}
	if v, ok := r.driverLatency(); !ok || v != 500 {
		t.Errorf("driver stage %d %v", v, ok)
	}
	if v, ok := r.deviceLatency(); !ok || v != 2500 {
		t.Errorf("device stage %d %v", v, ok)
	}
	// No start stamp: only the device stage is measured.
	r.StartNs = 0
	if _, ok := r.reqLatency(); ok {
		t.Error("request stage without a start")
	}
	if _, ok := r.driverLatency(); ok {
		t.Error("driver stage without a start")
	}
	for _, bad := range [][]byte{raw[:recSize-1], rawRec(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ""), rawRec(0, 0, 0, 0, 0, 0, 4, 0, 0, 0, "")} {
		if _, err := DecodeRequest(bad); err == nil {
			t.Errorf("no error for %x", bad)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(rawRec(1, 2, 3, 8<<20, 1, 4096, 1, opRead, 0, 0, "fio"))
	f.Add(rawRec(0, 0, 9, 253<<20|16, 0, 0, 2, opFlush, 31, 3, "kworker/u8:2\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeRequest(raw)
		if err != nil {
			return
		}
		if !r.Latency && !r.Error {
			t.Fatal("record of no kind accepted")
		}
		_ = Rwbs(r.Op, r.Flags)
		a := newAggregator()
		a.add(r)
		for d, agg := range a.take() {
			_ = latencyRecord(d, names{}, agg, time.Unix(0, 0), time.Second)
			_ = errorEvents(d, names{}, agg, time.Unix(0, 0))
		}
	})
}

func TestRwbs(t *testing.T) {
	for _, c := range []struct {
		op, flags uint8
		want      string
	}{
		{opRead, 0, "R"},
		{opRead, uint8(ioIoReqFlagIO_F_RAHEAD), "RA"},
		{opWrite, uint8(ioIoReqFlagIO_F_SYNC), "WS"},
		{opWrite, uint8(ioIoReqFlagIO_F_PREFLUSH | ioIoReqFlagIO_F_FUA | ioIoReqFlagIO_F_SYNC), "FWFS"},
		{opFlush, uint8(ioIoReqFlagIO_F_PREFLUSH), "FF"},
		{opDiscard, 0, "D"},
		{opSecureErase, 0, "DE"},
		{opWriteZeroes, 0, "WZ"},
		{opRead, uint8(ioIoReqFlagIO_F_META | ioIoReqFlagIO_F_SYNC), "RSM"},
		{34, 0, "N"},
	} {
		if got := Rwbs(c.op, c.flags); got != c.want {
			t.Errorf("Rwbs(%d, %#x) = %q, want %q", c.op, c.flags, got, c.want)
		}
	}
}

func TestStage(t *testing.T) {
	var s stage
	for _, v := range []uint64{100, 400, 150, 160} {
		s.add(v)
	}
	// jitter: largest |difference| between consecutive samples (300).
	want := stage{max: 400, last: 160, sum: 810, jitter: 300, count: 4}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

func req(dev Dev, start, issue, done uint64, pid uint32, comm string) Request {
	return Request{Disk: dev, StartNs: start, IssueNs: issue, DoneNs: done, PID: pid, Comm: comm, DataLen: 4096, Latency: true, Op: opRead}
}

func TestLatencyRecordAndEvent(t *testing.T) {
	d := Dev{8, 0}
	n := names{blk: "sda", disk: "sda"}
	a := newAggregator()
	ms := uint64(time.Millisecond)
	a.add(req(d, 0, 5, 7, 1, "a"))                    // device stage only
	a.add(req(d, 10*ms, 11*ms, 30*ms, 2, "slow"))     // 20 ms
	a.add(req(d, 100*ms, 101*ms, 103*ms, 3, "quick")) // 3 ms
	a.add(Request{Disk: d, Error: true, Status: 1})   // errors do not count as latency
	got := a.take()[d]
	end := time.Unix(100, 0)
	r := latencyRecord(d, n, got, end, time.Second)
	val := func(f string) float64 { return r.Values[table.IoLatency.MustIndex(f)].Num }
	if val("count_latency_req") != 2 || val("count_latency_driver") != 2 || val("count_latency_device") != 3 {
		t.Errorf("counts %v %v %v", val("count_latency_req"), val("count_latency_driver"), val("count_latency_device"))
	}
	if val("latency_req_max") != float64(20*ms) || val("latency_req_last") != float64(3*ms) || val("latency_req_sum") != float64(23*ms) {
		t.Errorf("request stage %v %v %v", val("latency_req_max"), val("latency_req_last"), val("latency_req_sum"))
	}
	if val("latency_device_max") != float64(19*ms) || val("latency_driver_max") != float64(ms) {
		t.Errorf("driver max %v device max %v", val("latency_driver_max"), val("latency_device_max"))
	}

	p := probe.DefaultParams()
	if e := latencyEvent(d, n, got, p, end); e != nil {
		t.Errorf("event without latency_thr: %+v", e)
	}
	p.LatencyThr = 21
	if e := latencyEvent(d, n, got, p, end); e != nil {
		t.Errorf("event under the threshold: %+v", e)
	}
	p.LatencyThr = 20
	e := latencyEvent(d, n, got, p, end)
	if e == nil {
		t.Fatal("no event at the threshold")
	}
	wantMsg := "IO latency occurred.(Disk sda(8:0), COMM slow, PID 2, op: R, datalen 4096, drv_latency 1000000, dev_latency 19000000)"
	want := event.Event{Time: end, Entity: "block", EntityID: "8_0", Metric: "latency_req_max", PID: 2, Comm: "slow", Device: "sda", Severity: event.SeverityWarn, Message: wantMsg}
	if *e != want {
		t.Errorf("got %+v\nwant %+v", *e, want)
	}

	// A disk with only device-stage samples: request and driver fields unset.
	a.add(req(d, 0, 5, 9, 1, "a"))
	r = latencyRecord(d, n, a.take()[d], end, time.Second)
	for i, f := range table.IoLatency.Fields {
		isDev := strings.Contains(f.Name, "device")
		if f.Kind.IsMetric() && r.Values[i].Set != isDev {
			t.Errorf("%s set=%v", f.Name, r.Values[i].Set)
		}
	}
	if latencyRecord(d, n, &diskAgg{}, end, time.Second) != nil {
		t.Error("row for a disk without requests")
	}
}

func TestErrors(t *testing.T) {
	d := Dev{7, 1}
	n := names{blk: "loop1", disk: "loop1"}
	a := newAggregator()
	a.add(Request{Disk: d, Error: true, Status: 10, PID: 9, Comm: "dd", DataLen: 512, Op: opWrite, DoneNs: 1500000})
	a.add(Request{Disk: d, Error: true, Status: 3, PID: 9, Comm: "dd", DataLen: 512, Op: opWrite, DoneNs: 2500000})
	agg := a.take()[d]
	end := time.Unix(5, 0)
	r := errRecord(d, n, agg, end, time.Second)
	if got := r.Values[errCode].Num; got != -28 {
		t.Errorf("err_code %v, want -28 (the last failure, ENOSPC)", got)
	}
	evs := errorEvents(d, n, agg, end)
	msgs := []string{}
	for _, e := range evs {
		msgs = append(msgs, e.Message)
	}
	want := []string{
		"IO errors occurred.(Disk loop1(7:1), COMM dd, PID 9, op: W, datalen 512, blk_err(10) 'I/O error', scsi_err(0) 'UNKNOW', timestamp 1.500000)",
		"IO errors occurred.(Disk loop1(7:1), COMM dd, PID 9, op: W, datalen 512, blk_err(3) 'critical space allocation', scsi_err(0) 'UNKNOW', timestamp 2.500000)",
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("got %q\nwant %q", msgs, want)
	}
	if errRecord(d, n, &diskAgg{}, end, time.Second) != nil {
		t.Error("io_err row without failures")
	}
	for i := 0; i < 2*maxErrorsPerPeriod; i++ {
		a.add(Request{Disk: d, Error: true, Status: 10})
	}
	if agg := a.take()[d]; len(agg.errs) != maxErrorsPerPeriod || agg.errN != 2*maxErrorsPerPeriod {
		t.Errorf("kept %d of %d errors", len(agg.errs), agg.errN)
	}
}

func TestCounts(t *testing.T) {
	per := []ioIoCounts{{ReadBytes: 10, WriteBytes: 20, LoadPageCache: 1}, {ReadBytes: 5, MarkPageDirty: 2, MarkBufferDirty: 3}}
	c := sumCPUs(per)
	if c != (counts{readBytes: 15, writeBytes: 20, loadPageCache: 1, markPageDirty: 2, markBufferDirty: 3}) {
		t.Fatalf("sum %+v", c)
	}
	d := c.sub(counts{readBytes: 5, writeBytes: 20})
	if d != (counts{readBytes: 10, loadPageCache: 1, markPageDirty: 2, markBufferDirty: 3}) {
		t.Errorf("delta %+v", d)
	}
	dev, n, end := Dev{8, 1}, names{"sda1", "sda"}, time.Unix(1, 0)
	r := countRecord(dev, n, d, end, time.Second)
	if r.Str("blk_name") != "sda1" || r.Str("disk_name") != "sda" || r.Values[cntRead].Num != 10 || r.Values[cntWrite].Num != 0 || !r.Values[cntWrite].Set {
		t.Errorf("io_count %+v", r.Values)
	}
	pc := pagecacheRecord(dev, n, d, end, time.Second)
	if pc.Values[table.IoPagecache.MustIndex("access_pagecache")].Set {
		t.Error("access_pagecache set")
	}
	if countRecord(dev, n, counts{markPageDirty: 1}, end, time.Second) != nil || pagecacheRecord(dev, n, counts{readBytes: 1}, end, time.Second) != nil {
		t.Error("rows without their activity")
	}
}

// TestSysBlock builds a sysfs tree: disk vdb with partitions vdb1 and
// vdb2, and loop3 without any.
func TestSysBlock(t *testing.T) {
	root := t.TempDir()
	mk := func(dir, dev string, part bool) {
		p := filepath.Join(root, "sys/devices", dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "dev"), []byte(dev+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if part {
			if err := os.WriteFile(filepath.Join(p, "partition"), []byte("1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range []string{"sys/dev/block/" + dev, "sys/class/block/" + filepath.Base(dir)} {
			lp := filepath.Join(root, l)
			if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(filepath.Dir(lp), p)
			if err := os.Symlink(rel, lp); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("pci0/virtio2/block/vdb", "254:16", false)
	mk("pci0/virtio2/block/vdb/vdb1", "254:17", true)
	mk("pci0/virtio2/block/vdb/vdb2", "254:18", true)
	mk("virtual/block/loop3", "7:3", false)
	s := sysBlock{root: root}
	for d, want := range map[Dev]names{
		{254, 16}: {"vdb", "vdb"}, {254, 17}: {"vdb1", "vdb"}, {7, 3}: {"loop3", "loop3"}, {9, 9}: {},
	} {
		if got := s.names(d); got != want {
			t.Errorf("names(%v) = %+v, want %+v", d, got, want)
		}
	}
	for name, want := range map[string][]Dev{
		"vdb": {{254, 16}, {254, 17}, {254, 18}}, "vdb2": {{254, 18}}, "loop3": {{7, 3}},
	} {
		got, err := s.devices(name)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("devices(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, bad := range []string{"nope", "../vdb", "", ".."} {
		if got, err := s.devices(bad); err == nil {
			t.Errorf("devices(%q) = %v, no error", bad, got)
		}
	}
}

func TestParseDev(t *testing.T) {
	for in, want := range map[string]Dev{"8:0\n": {8, 0}, "259:1": {259, 1}} {
		if got, err := parseDev(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("parseDev(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "8", "8:x", "4096:0", "1:1048576"} {
		if _, err := parseDev(strings.NewReader(bad)); err == nil {
			t.Errorf("parseDev(%q): no error", bad)
		}
	}
}
