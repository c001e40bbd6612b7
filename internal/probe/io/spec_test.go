package ioprobe

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/bpfrt/bpfspec"
)

// TestSpec checks both architectures' objects without loading them: every
// program of the hooks table with its attach point, the bounded maps, the
// run-time variables and the record layout DecodeRequest reads.
func TestSpec(t *testing.T) {
	bpfspec.Objects(t, _IoBytes, []string{"io_x86_bpfel.o", "io_arm64_bpfel.o"}, checkSpec)
	var rec ioIoErrRec
	if got := unsafe.Sizeof(rec); got != recSize {
		t.Errorf("ioIoErrRec is %d bytes, recSize %d", got, recSize)
	}
	for name, c := range map[string][2]uintptr{
		"done_ns":  {unsafe.Offsetof(rec.DoneNs), offDone},
		"dev":      {unsafe.Offsetof(rec.Dev), offDev},
		"pid":      {unsafe.Offsetof(rec.Pid), offPid},
		"data_len": {unsafe.Offsetof(rec.DataLen), offDataLen},
		"op":       {unsafe.Offsetof(rec.Op), offOp},
		"flags":    {unsafe.Offsetof(rec.Flags), offFlags},
		"status":   {unsafe.Offsetof(rec.Status), offStatus},
		"comm":     {unsafe.Offsetof(rec.Comm), offComm},
	} {
		if c[0] != c[1] {
			t.Errorf("io_err_rec.%s at %d, the decoder reads %d", name, c[0], c[1])
		}
	}
	if len(rec.Comm) != commLen {
		t.Errorf("comm of %d bytes", len(rec.Comm))
	}
	var l ioIoLat
	if len(l.Stage) != len(stageFields) || int(ioIoStageIdIO_STAGES) != len(stageFields) {
		t.Errorf("%d stages in io_lat, %d in io_latency", len(l.Stage), len(stageFields))
	}
}

// latSize is sizeof(struct io_lat): three stages of six u64, the slowest
// request's latency, pid, length, op, flags (padded) and comm.
const latSize = 3*48 + 8 + 4 + 4 + 8 + 16

func checkSpec(t *testing.T, spec *ebpf.CollectionSpec) {
	progs := map[string]bpfspec.Program{}
	for _, h := range hooks {
		progs[h.prog] = bpfspec.Program{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: h.target}
	}
	if len(progs) != len(hooks) {
		t.Errorf("hooks table names %d programs, %d distinct", len(hooks), len(progs))
	}
	bpfspec.Programs(t, spec, progs)
	bpfspec.Maps(t, spec, map[string]bpfspec.Map{
		"events":      {Type: ebpf.RingBuf, MaxEntries: 256 << 10},
		"lat_active":  {Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1},
		"lost_events": {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"rq_inflight": {Type: ebpf.Hash, KeySize: 8, ValueSize: 32, MaxEntries: 16384},
		"dev_counts":  {Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 40, MaxEntries: 1024},
		"dev_filter":  {Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 256},
		"io_drops":    {Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(ioIoDropIO_DROP_MAX)},
	})
	bpfspec.Variables(t, spec, map[string]bpfspec.Variable{
		"galago_rb_wakeup_bytes": {Size: 8, Constant: true},
		"dev_filter_on":          {Size: 4},
		"io_flags":               {Size: 4},
	})
	bpfspec.StructSize(t, spec, "io_err_rec", recSize)
	bpfspec.StructSize(t, spec, "io_lat", latSize)
	// The latency maps user space makes and swaps in.
	inner := spec.Maps["lat_active"].InnerMap
	if inner == nil || inner.Type != ebpf.PerCPUHash || inner.KeySize != 4 || inner.ValueSize != latSize || inner.MaxEntries != 1024 {
		t.Errorf("lat_active inner map %+v, want a per-CPU hash of 1024 disks, %d-byte values", inner, latSize)
	}
	bpfspec.StructSize(t, spec, "io_counts", 40)
	bpfspec.StructSize(t, spec, "io_inflight", 32)
}
