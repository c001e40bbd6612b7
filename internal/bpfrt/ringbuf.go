package bpfrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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
	// Wakeup is what ApplyWakeup gave the BPF side for this ring; the zero
	// value for the kernel's default. A parked reader takes a ring holding
	// at least this much as ready, so a wake-up that came while it was
	// draining is not waited out.
	Wakeup Wakeup
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
	// OnDrained, when set, is called on the reading goroutine after each
	// drain that emptied the ring, with the CLOCK_MONOTONIC time (ns)
	// taken before it began: every record submitted before then has been
	// handed to Handle.
	OnDrained func(asOf uint64)
}

// Reader drains a BPF ring buffer: it parks until the BPF side wakes it or
// FlushInterval passes, then hands every pending record to Handle before
// parking again, and reports the growth of lost_events (see Run).
//
// The ring is read from its own memory mapping and waited for in the Go
// runtime's network poller (a non-blocking duplicate of the map's
// descriptor), so a wake costs no system call of the reader's own and no
// thread blocked in one: a reader blocked in epoll_wait had its P retaken
// by sysmon every time, and kept sysmon polling every 20 µs
// (BENCHMARKS.md, "ring readers parked in the network poller").
type Reader struct {
	cfg    ReaderConfig
	file   *os.File
	conn   syscall.RawConn
	wakeAt uint64 // bytes pending that make a parked reader ready
	// lossAt: a drain of at least this many bytes reads the loss counter.
	lossAt uint64

	// mu guards ring and running: Close unmaps the ring only when no Run
	// reads it, else the Run that ends last does.
	mu      sync.Mutex
	ring    *ring
	running bool
	closed  atomic.Bool

	// beforePark, when set (tests), runs after a drain found the ring
	// empty and before the reader parks.
	beforePark func()

	buf      []byte
	lastLost uint64
	// perCPU is pollLost's buffer for the loss counter's per-CPU values
	// (a Lookup into a pointer to a slice allocates one every call).
	perCPU []uint64
}

// NewReader maps the ring buffer for reading.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.Ring == nil || cfg.Handle == nil {
		return nil, errors.New("bpfrt: ReaderConfig needs Ring and Handle")
	}
	if cfg.Ring.Type() != ebpf.RingBuf {
		return nil, fmt.Errorf("bpfrt: ring map is %s, want RingBuf", cfg.Ring.Type())
	}
	if cfg.Lost != nil && cfg.Lost.Type() != ebpf.PerCPUArray {
		return nil, fmt.Errorf("bpfrt: lost map is %s, want PerCPUArray", cfg.Lost.Type())
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	size := int(cfg.Ring.MaxEntries())
	r := &Reader{cfg: cfg, wakeAt: max(cfg.Wakeup.Bytes(size), 1), lossAt: uint64(size) / 2}
	if cfg.Lost != nil {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, fmt.Errorf("bpfrt: %w", err)
		}
		r.perCPU = make([]uint64, n)
	}
	var err error
	if r.ring, err = mapRing(cfg.Ring.FD(), size); err != nil {
		return nil, fmt.Errorf("bpfrt: %w", err)
	}
	if err := r.openPoller(); err != nil {
		_ = r.ring.unmap()
		return nil, fmt.Errorf("bpfrt: wait for the ring in the network poller: %w", err)
	}
	return r, nil
}

// openPoller duplicates the ring's descriptor, non-blocking, into an
// os.File, which registers it with the runtime's poller (edge-triggered;
// the ring reports readable when its producer wakes readers).
func (r *Reader) openPoller() error {
	fd, err := unix.FcntlInt(uintptr(r.cfg.Ring.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	r.file = os.NewFile(uintptr(fd), "bpf ring "+r.cfg.Ring.String())
	// A descriptor the poller did not take has no deadlines.
	if err := r.file.SetReadDeadline(time.Time{}); err != nil {
		r.file.Close()
		return err
	}
	if r.conn, err = r.file.SyscallConn(); err != nil {
		r.file.Close()
		return err
	}
	return nil
}

// Run reads until ctx is done or the Reader is closed, then reports the
// final loss and returns nil (after ctx is done it first drains what is
// left). It returns an error only if the ring cannot be read. Run must not
// be called concurrently with itself.
//
// The loss counter is read after a drain of at least half the ring, when
// ctx is done, and at least every lossPollInterval. A reservation fails
// only when the bytes not yet consumed would pass the ring's size with the
// new record, so every drain that follows a loss consumes more than the
// ring's size less one record: the loss is reported with the records
// around it. Only a record larger than half the ring, or a failure that is
// not a full ring, waits for the interval. Reading the counter after every
// drain cost a bpf() call each, and each system call after an idle spell
// keeps the runtime's sysmon polling every 20 µs (BENCHMARKS.md, "the
// agent's CPU per observed TCP connection").
func (r *Reader) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.ring == nil {
		r.mu.Unlock()
		return r.pollLost()
	}
	r.running = true
	rg := r.ring
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		if r.closed.Load() && r.ring != nil {
			_ = r.ring.unmap()
			r.ring = nil
		}
		r.mu.Unlock()
	}()

	stop := context.AfterFunc(ctx, func() { _ = r.file.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	handle := func(raw []byte) {
		if err := r.cfg.Handle(raw); err != nil && r.cfg.OnError != nil {
			r.cfg.OnError(err)
		}
	}
	polled := time.Now()
	for {
		var asOf uint64
		if r.cfg.OnDrained != nil {
			asOf = monoNow()
		}
		n, err := rg.drain(&r.buf, handle, r.closed.Load)
		if err != nil {
			return fmt.Errorf("read ring buffer: %w", err)
		}
		if r.closed.Load() {
			return r.pollLost()
		}
		if r.cfg.OnDrained != nil {
			// drain returns only on an empty ring or a close: a record
			// reserved before asOf was waited for until committed.
			r.cfg.OnDrained(asOf)
		}
		now := time.Now()
		done := ctx.Err() != nil
		if n >= r.lossAt || done || now.Sub(polled) >= lossPollInterval {
			if err := r.pollLost(); err != nil {
				return err
			}
			polled = now
		}
		if done {
			return nil
		}
		if r.beforePark != nil {
			r.beforePark()
		}
		if err := r.park(ctx, rg, now.Add(r.cfg.FlushInterval)); err != nil {
			return err
		}
	}
}

// park waits until the ring holds wakeAt bytes, the BPF side wakes it, the
// deadline passes, ctx is done or the Reader is closed. The readiness check
// runs inside the poller's read, after it forgets older readiness: a
// wake-up that came while the records were handled is seen in the bytes
// pending, and one that comes after the check ends the wait.
func (r *Reader) park(ctx context.Context, rg *ring, deadline time.Time) error {
	if ctx.Err() != nil {
		return nil
	}
	_ = r.file.SetReadDeadline(deadline)
	err := r.conn.Read(func(uintptr) bool {
		return rg.pending() >= r.wakeAt || ctx.Err() != nil || r.closed.Load()
	})
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !r.closed.Load() {
		return fmt.Errorf("wait for ring buffer: %w", err)
	}
	return nil
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

// Close releases the ring buffer. A parked Run returns at once, a Run in
// Handle after that record (Close does not wait for it: a handler may wait
// for whoever closes). Idempotent.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	err := r.file.Close()
	r.mu.Lock()
	if !r.running && r.ring != nil {
		err = errors.Join(err, r.ring.unmap())
		r.ring = nil
	}
	r.mu.Unlock()
	return err
}
