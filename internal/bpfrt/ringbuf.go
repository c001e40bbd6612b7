package bpfrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// Names shared with bpf/include/common.h (GALAGO_RINGBUF).
const (
	LostEventsMap     = "lost_events"
	WakeupBytesVar    = "galago_rb_wakeup_bytes"
	ringbufHeaderSize = 8 // struct bpf_ringbuf_hdr: len + pg_off
)

// DefaultFlushInterval bounds how long a record can wait in the ring when
// the BPF side did not wake the reader.
const DefaultFlushInterval = 100 * time.Millisecond

// lossPollInterval bounds how late a loss is reported when no record
// follows it (a record larger than the ring's free space, with the ring
// drained).
const lossPollInterval = time.Second

// Wakeup says when the BPF side wakes the reader (galago_rb_flags): once
// Records records of RecordSize bytes are pending, or the ring is
// FillPercent full, whichever comes first. The zero value keeps the kernel's
// default (a wake-up whenever the reader has caught up).
type Wakeup struct {
	Records     int
	RecordSize  int
	FillPercent int
}

// Bytes is the pending-data threshold for a ring of ringSize bytes.
func (w Wakeup) Bytes(ringSize int) uint64 {
	var n uint64
	if w.Records > 0 && w.RecordSize > 0 {
		// Each record carries an 8-byte header and is padded to 8 bytes.
		n = uint64(w.Records) * uint64((w.RecordSize+ringbufHeaderSize+7)&^7)
	}
	if w.FillPercent > 0 {
		f := uint64(ringSize) * uint64(w.FillPercent) / 100
		if n == 0 || f < n {
			n = f
		}
	}
	return n
}

// ApplyWakeup sets galago_rb_wakeup_bytes in spec for the ring map named
// ring. Call it before loading the collection.
func ApplyWakeup(spec *ebpf.CollectionSpec, ring string, w Wakeup) error {
	m, ok := spec.Maps[ring]
	if !ok {
		return fmt.Errorf("ring buffer map %q not in spec", ring)
	}
	v, ok := spec.Variables[WakeupBytesVar]
	if !ok {
		return fmt.Errorf("variable %s not in spec: define GALAGO_RINGBUF before including common.h", WakeupBytesVar)
	}
	return v.Set(w.Bytes(int(m.MaxEntries)))
}

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	// Ring is the BPF_MAP_TYPE_RINGBUF map.
	Ring *ebpf.Map
	// Lost is the per-CPU lost_events map; nil only for rings whose
	// producer cannot fail a reservation silently.
	Lost *ebpf.Map
	// Handle is called for each record, in order, on the reading goroutine.
	// raw is only valid during the call. An error counts as one bad record
	// (passed to OnError) and reading goes on.
	Handle func(raw []byte) error
	// OnLost receives the growth of the loss counter (never zero).
	OnLost func(n uint64)
	// OnError receives undecodable records; nil ignores them.
	OnError func(err error)
	// FlushInterval is the longest a record waits when no wake-up came.
	// Zero means DefaultFlushInterval.
	FlushInterval time.Duration
}

// Reader drains a BPF ring buffer: it blocks until the BPF side wakes it or
// FlushInterval passes, then hands every pending record to Handle before
// sleeping again, and reports the growth of lost_events after each batch
// (and at least every lossPollInterval).
type Reader struct {
	cfg      ReaderConfig
	rd       *ringbuf.Reader
	lastLost uint64
	// perCPU is pollLost's buffer for the loss counter's per-CPU values
	// (a Lookup into a pointer to a slice allocates one every call: ten
	// times a second per idle reader).
	perCPU []uint64
}

// NewReader opens the ring buffer for reading.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.Ring == nil || cfg.Handle == nil {
		return nil, errors.New("bpfrt: ReaderConfig needs Ring and Handle")
	}
	if cfg.Lost != nil && cfg.Lost.Type() != ebpf.PerCPUArray {
		return nil, fmt.Errorf("bpfrt: lost map is %s, want PerCPUArray", cfg.Lost.Type())
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	rd, err := ringbuf.NewReader(cfg.Ring)
	if err != nil {
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	r := &Reader{cfg: cfg, rd: rd}
	if cfg.Lost != nil {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			rd.Close()
			return nil, fmt.Errorf("bpfrt: %w", err)
		}
		r.perCPU = make([]uint64, n)
	}
	return r, nil
}

// Run reads until ctx is done, then drains what is left, reports the final
// loss and returns nil. It returns an error only if the ring cannot be read.
// Run must not be called concurrently with itself.
func (r *Reader) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = r.rd.Flush() })
	defer stop()

	var rec ringbuf.Record
	// The loss counter is read after a wake that handled records, and at
	// least every lossPollInterval: a reservation fails when the ring is
	// full, so records are pending when the reader next wakes. Reading it
	// on every idle wake (ten a second per reader) cost a bpf() call each,
	// and each system call after an idle spell keeps the runtime's sysmon
	// polling every 20 µs (BENCHMARKS.md, "the agent's CPU per observed
	// TCP connection").
	handled, polled := false, time.Now()
	// The deadline only matters when ReadInto would wait (the ring is
	// drained): it is set again after each wait, not per record (reading
	// the clock per record was a tenth of a busy reader's time). A
	// deadline that passed while records flowed only costs one more turn.
	r.rd.SetDeadline(time.Now().Add(r.cfg.FlushInterval))
	for {
		err := r.rd.ReadInto(&rec)
		switch {
		case err == nil:
			handled = true
			if herr := r.cfg.Handle(rec.RawSample); herr != nil && r.cfg.OnError != nil {
				r.cfg.OnError(herr)
			}
			continue
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
			// The ring was drained before either error was returned.
		case errors.Is(err, ringbuf.ErrClosed):
			return r.pollLost()
		default:
			return fmt.Errorf("read ring buffer: %w", err)
		}
		now := time.Now()
		done := ctx.Err() != nil
		if handled || done || now.Sub(polled) >= lossPollInterval {
			if err := r.pollLost(); err != nil {
				return err
			}
			handled, polled = false, now
		}
		if done {
			return nil
		}
		r.rd.SetDeadline(now.Add(r.cfg.FlushInterval))
	}
}

// pollLost reports the growth of lost_events since the last call.
func (r *Reader) pollLost() error {
	if r.cfg.Lost == nil {
		return nil
	}
	total, err := r.lostTotal(r.perCPU)
	if err != nil {
		return err
	}
	if total > r.lastLost {
		if r.cfg.OnLost != nil {
			r.cfg.OnLost(total - r.lastLost)
		}
		r.lastLost = total
	}
	return nil
}

// LostTotal is the loss counter summed over CPUs, since the map was created.
func (r *Reader) LostTotal() (uint64, error) {
	return r.lostTotal(make([]uint64, len(r.perCPU)))
}

// lostTotal is LostTotal read into perCPU (one value per possible CPU).
func (r *Reader) lostTotal(perCPU []uint64) (uint64, error) {
	if err := r.cfg.Lost.Lookup(uint32(0), perCPU); err != nil {
		return 0, fmt.Errorf("read %s: %w", LostEventsMap, err)
	}
	var sum uint64
	for _, v := range perCPU {
		sum += v
	}
	return sum, nil
}

// Close releases the ring buffer; a blocked Run returns. Idempotent.
func (r *Reader) Close() error {
	return r.rd.Close()
}
