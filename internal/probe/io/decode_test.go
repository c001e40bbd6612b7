package ioprobe

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// rawRec lays out one struct io_err_rec by hand, byte by byte, as the
// kernel writes it (little endian).
func rawRec(done uint64, dev, pid, dataLen uint32, op, flags, status uint8, comm string) []byte {
	b := make([]byte, recSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], done)
	le.PutUint32(b[8:], dev)
	le.PutUint32(b[12:], pid)
	le.PutUint32(b[16:], dataLen)
	b[20], b[21], b[22] = op, flags, status
	copy(b[24:], comm)
	return b
}

func TestDecodeFailure(t *testing.T) {
	raw := rawRec(4000, 7<<20|3, 42, 16384, opWrite, uint8(ioIoReqFlagIO_F_SYNC), 10, "dd")
	r, err := DecodeFailure(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Failure{Disk: Dev{7, 3}, DoneNs: 4000, PID: 42, Comm: "dd", DataLen: 16384, Op: opWrite, Flags: uint8(ioIoReqFlagIO_F_SYNC), Status: 10}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	full := rawRec(1, 1, 1, 1, 0, 0, 1, "0123456789abcdef")
	if r, err := DecodeFailure(full); err != nil || r.Comm != "0123456789abcdef" {
		t.Errorf("16-byte comm: %q, %v", r.Comm, err)
	}
	for _, bad := range [][]byte{raw[:recSize-1], rawRec(1, 1, 1, 1, 0, 0, 0, "")} {
		if _, err := DecodeFailure(bad); err == nil {
			t.Errorf("no error for %x", bad)
		}
	}
}

func FuzzDecodeFailure(f *testing.F) {
	f.Add(rawRec(3, 8<<20, 1, 4096, opRead, 0, 10, "fio"))
	f.Add(rawRec(9, 253<<20|16, 0, 0, opFlush, 31, 200, "kworker/u8:2\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeFailure(raw)
		if err != nil {
			return
		}
		if r.Status == 0 {
			t.Fatal("failure without status accepted")
		}
		fs := newFailures()
		fs.add(r)
		for d, a := range fs.take() {
			if errRecord(d, names{}, a, time.Unix(0, 0), time.Second) == nil || len(errorEvents(d, names{}, a, time.Unix(0, 0))) != 1 {
				t.Fatal("a failure without its row and event")
			}
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

// cpuLat is one CPU's struct io_lat with the given request-stage samples
// (the BPF side's arithmetic, redone here) and fixed driver and device
// samples.
func cpuLat(samples []uint64, at []uint64, slowComm string) ioIoLat {
	var l ioIoLat
	for i, v := range samples {
		for _, st := range []int{int(ioIoStageIdIO_STAGE_REQ), int(ioIoStageIdIO_STAGE_DRIVER), int(ioIoStageIdIO_STAGE_DEVICE)} {
			s := &l.Stage[st]
			x := v
			if st == int(ioIoStageIdIO_STAGE_DRIVER) {
				x = v / 10
			} else if st == int(ioIoStageIdIO_STAGE_DEVICE) {
				x = v - v/10
			}
			if s.Count == 0 {
				s.Max, s.Sum = x, x
			} else {
				s.Max = max(s.Max, x)
				s.Sum += x
				d := x - s.Last
				if x < s.Last {
					d = s.Last - x
				}
				s.Jitter = max(s.Jitter, d)
			}
			s.Last, s.LastNs = x, at[i]
			s.Count++
		}
		if i == 0 || v > l.SlowNs {
			l.SlowNs, l.SlowPid, l.SlowLen = v, uint32(100+i), 4096
			copy(l.SlowComm[:], toInt8(slowComm))
		}
	}
	return l
}

func toInt8(s string) []int8 {
	out := make([]int8, len(s))
	for i := range s {
		out[i] = int8(s[i])
	}
	return out
}

func TestMergeLat(t *testing.T) {
	ms := uint64(time.Millisecond)
	per := []ioIoLat{
		cpuLat([]uint64{10 * ms, 40 * ms, 15 * ms}, []uint64{1, 2, 9}, "a"),
		{}, // an idle CPU
		cpuLat([]uint64{20 * ms, 16 * ms}, []uint64{3, 4}, "b"),
	}
	l := mergeLat(per)
	req := l.stages[ioIoStageIdIO_STAGE_REQ]
	want := stage{max: 40 * ms, last: 15 * ms, lastNs: 9, sum: 101 * ms, jitter: 30 * ms, count: 5}
	if req != want {
		t.Errorf("request stage %+v, want %+v", req, want)
	}
	if drv := l.stages[ioIoStageIdIO_STAGE_DRIVER]; drv.count != 5 || drv.max != 4*ms || drv.sum != 10100*uint64(time.Microsecond) {
		t.Errorf("driver stage %+v", drv)
	}
	if l.slowNs != 40*ms || l.slowComm != "a" || l.slowPID != 101 {
		t.Errorf("slowest %d %q %d", l.slowNs, l.slowComm, l.slowPID)
	}
}

func TestLatencyRecordAndEvent(t *testing.T) {
	d := Dev{8, 0}
	n := names{blk: "sda", disk: "sda"}
	ms := uint64(time.Millisecond)
	l := mergeLat([]ioIoLat{cpuLat([]uint64{20 * ms, 3 * ms}, []uint64{1, 2}, "slow")})
	l.slowOp = opRead
	end := time.Unix(100, 0)
	r := latencyRecord(d, n, l, end, time.Second)
	val := func(f string) float64 { return r.Values[table.IoLatency.MustIndex(f)].Num }
	if val("count_latency_req") != 2 || val("count_latency_driver") != 2 || val("count_latency_device") != 2 {
		t.Errorf("counts %v %v %v", val("count_latency_req"), val("count_latency_driver"), val("count_latency_device"))
	}
	if val("latency_req_max") != float64(20*ms) || val("latency_req_last") != float64(3*ms) || val("latency_req_sum") != float64(23*ms) || val("latency_req_jitter") != float64(17*ms) {
		t.Errorf("request stage %v %v %v %v", val("latency_req_max"), val("latency_req_last"), val("latency_req_sum"), val("latency_req_jitter"))
	}

	p := probe.DefaultParams()
	if e := latencyEvent(d, n, l, p, end); e != nil {
		t.Errorf("event without latency_thr: %+v", e)
	}
	p.LatencyThr = 21
	if e := latencyEvent(d, n, l, p, end); e != nil {
		t.Errorf("event under the threshold: %+v", e)
	}
	p.LatencyThr = 20
	e := latencyEvent(d, n, l, p, end)
	if e == nil {
		t.Fatal("no event at the threshold")
	}
	wantMsg := "IO latency occurred.(Disk sda(8:0), COMM slow, PID 100, op: R, datalen 4096, drv_latency 2000000, dev_latency 18000000)"
	want := event.Event{Time: end, Entity: "block", EntityID: "8_0", Metric: "latency_req_max", PID: 100, Comm: "slow", Device: "sda", Severity: event.SeverityWarn, Message: wantMsg,
		Desc: event.BlockLatency, Args: e.Args}
	if !reflect.DeepEqual(*e, want) {
		t.Errorf("got %+v\nwant %+v", *e, want)
	}

	// A disk with only device-stage samples (no start stamp): request and
	// driver fields unset, never 0.
	var dev ioIoLat
	dev.Stage[ioIoStageIdIO_STAGE_DEVICE] = ioIoStage{Max: 5, Last: 5, Sum: 5, Count: 1}
	r = latencyRecord(d, n, mergeLat([]ioIoLat{dev}), end, time.Second)
	for i, f := range table.IoLatency.Fields {
		isDev := strings.Contains(f.Name, "device")
		if f.Kind.IsMetric() && r.Values[i].Set != isDev {
			t.Errorf("%s set=%v", f.Name, r.Values[i].Set)
		}
	}
	if latencyRecord(d, n, latStats{}, end, time.Second) != nil {
		t.Error("row for a disk without requests")
	}
	if e := latencyEvent(d, n, mergeLat([]ioIoLat{dev}), p, end); e != nil {
		t.Error("latency event without request-stage samples")
	}
}

func TestErrors(t *testing.T) {
	d := Dev{7, 1}
	n := names{blk: "loop1", disk: "loop1"}
	fs := newFailures()
	fs.add(Failure{Disk: d, Status: 10, PID: 9, Comm: "dd", DataLen: 512, Op: opWrite, DoneNs: 1500000})
	fs.add(Failure{Disk: d, Status: 3, PID: 9, Comm: "dd", DataLen: 512, Op: opWrite, DoneNs: 2500000})
	agg := fs.take()[d]
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
	if errRecord(d, n, nil, end, time.Second) != nil || errorEvents(d, n, nil, end) != nil {
		t.Error("io_err row or events without failures")
	}
	for i := 0; i < 2*maxErrorsPerPeriod; i++ {
		fs.add(Failure{Disk: d, Status: 10})
	}
	if agg := fs.take()[d]; len(agg.errs) != maxErrorsPerPeriod || agg.n != 2*maxErrorsPerPeriod {
		t.Errorf("kept %d of %d errors", len(agg.errs), agg.n)
	}
	if st := statusOf(250); st.errno != -5 {
		t.Errorf("unknown status: %+v", st)
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
