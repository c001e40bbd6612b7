package syscap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/snoop"
)

// Shared is one Capture for several consumers (the l7 probe and the
// ksli and postgre_sli views), so that a second consumer costs no second
// set of hooks: the capture is opened with the first Subscribe and
// closed with the last Sub's Close.
//
// The kernel traces the union of the consumers' protocols. Its process
// filter is the consumers' snoopers when they all have the same (one
// consumer: exactly what it asked for, as with a private Capture);
// otherwise it observes every process and each consumer with snoopers
// of its own gets only the connections of the processes they observe,
// checked once per connection in user space (and, for a consumer that
// checks again at report, of those they have not settled about yet:
// Sub.CheckedAtReport). A connection goes to each
// consumer that traces its protocol and observes its process (a TLS
// connection, only to consumers that attached TLS uprobes); its Data and
// Close records go to those consumers only.
type Shared struct {
	opts Options // Handler and OnLost are the Shared's own

	mu      sync.Mutex
	c       *Capture
	subs    []*Sub
	cancel  context.CancelFunc
	done    chan struct{} // closed when the capture's Run returned
	runErr  error
	applied Config
	// owners are the consumers of each connection, by connection id; a
	// slice stored there is never changed in place (Data reads it after
	// unlocking).
	hmu    sync.Mutex
	owners map[uint64][]*Sub
}

// NewShared returns a Shared capture; opts.Handler and opts.OnLost are
// ignored (each Sub has its own).
func NewShared(opts Options) *Shared {
	return &Shared{opts: opts, owners: map[uint64][]*Sub{}}
}

// Sub is one consumer of a Shared capture.
type Sub struct {
	s       *Shared
	h       Handler
	onLost  func(uint64)
	cfg     Config
	targets snoop.Targets
	tls     bool // the consumer attached TLS uprobes
	filter  bool // check targets in user space (the kernel observes more)
	// atReport: the consumer checks its snoopers again when it reports,
	// holding back the rows of processes they have not settled about
	// (CheckedAtReport).
	atReport bool
	closed   bool
	// sub fields are guarded by Shared.mu.
}

// ErrSharedFailed says the shared capture stopped with an error and
// cannot take new consumers until those it had have closed.
var ErrSharedFailed = errors.New("syscap: shared capture failed; waiting for its consumers to stop")

// Subscribe adds a consumer: h gets the records of its connections,
// onLost the capture's losses (each consumer counts them). Nothing is
// traced for it until SetConfig.
func (s *Shared) Subscribe(h Handler, onLost func(uint64)) (*Sub, error) {
	if h == nil {
		return nil, errors.New("syscap: no handler")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		opts := s.opts
		opts.Handler = sharedHandler{s}
		opts.OnLost = s.lost
		c, err := Open(opts)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.c, s.cancel, s.done, s.runErr, s.applied = c, cancel, make(chan struct{}), nil, Config{}
		go func() {
			err := c.Run(ctx)
			s.mu.Lock()
			s.runErr = err
			s.mu.Unlock()
			close(s.done)
		}()
	} else if s.failedLocked() {
		return nil, ErrSharedFailed
	}
	sub := &Sub{s: s, h: h, onLost: onLost}
	s.subs = append(s.subs, sub)
	return sub, nil
}

func (s *Shared) failedLocked() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Shared) lost(n uint64) {
	s.mu.Lock()
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	for _, sub := range subs {
		if sub.onLost != nil {
			sub.onLost(n)
		}
	}
}

// SetConfig sets the consumer's protocols and capture sizes; the kernel
// gets the union of every consumer's.
func (sub *Sub) SetConfig(cfg Config) error {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub.closed {
		return errors.New("syscap: consumer closed")
	}
	sub.cfg = cfg
	return s.applyLocked()
}

// CheckedAtReport says the consumer checks its snoopers again when it
// reports, holding back the rows of processes they have not settled about
// (snoop.Holdback): it then also gets the connections of processes its
// snoopers do not observe yet but may once the process's fork and exec
// events are handled (a new process the kernel observed from its exec).
// A consumer whose rows do not say which process made them must not.
func (sub *Sub) CheckedAtReport() {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.atReport = true
}

// SetTargets sets the consumer's snoopers (nil: every process).
func (sub *Sub) SetTargets(t snoop.Targets) error {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub.closed {
		return errors.New("syscap: consumer closed")
	}
	sub.targets = t
	return s.applyLocked()
}

// applyLocked sends the union of the consumers' configurations to the
// capture.
func (s *Shared) applyLocked() error {
	var union Config
	same := true
	for i, sub := range s.subs {
		for _, p := range sub.cfg.Protocols {
			if !slices.Contains(union.Protocols, p) {
				union.Protocols = append(union.Protocols, p)
			}
		}
		union.Cap = max(union.Cap, sub.cfg.Cap)
		union.ContCap = max(union.ContCap, sub.cfg.ContCap)
		for _, p := range sub.cfg.Whole {
			if !slices.Contains(union.Whole, p) {
				union.Whole = append(union.Whole, p)
			}
		}
		union.WholeMax = max(union.WholeMax, sub.cfg.WholeMax)
		if i > 0 && sub.targets != s.subs[0].targets {
			same = false
		}
	}
	var kernel snoop.Targets
	if same && len(s.subs) > 0 {
		kernel = s.subs[0].targets
	}
	for _, sub := range s.subs {
		sub.filter = !same && sub.targets != nil
	}
	if !sameConfig(union, s.applied) {
		if err := s.c.SetConfig(union); err != nil {
			return err
		}
		s.applied = union
	}
	if err := s.c.SetTargets(kernel); err != nil {
		return fmt.Errorf("syscap: snooper filter: %w", err)
	}
	return nil
}

func sameConfig(a, b Config) bool {
	return a.Cap == b.Cap && a.ContCap == b.ContCap && slices.Equal(a.Protocols, b.Protocols) &&
		slices.Equal(a.Whole, b.Whole) && a.WholeMax == b.WholeMax
}

// Run waits until ctx is done (nil) or the shared capture fails (its
// error): a consumer runs it as one of its goroutines.
func (sub *Sub) Run(ctx context.Context) error {
	s := sub.s
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case <-done:
		s.mu.Lock()
		err := s.runErr
		s.mu.Unlock()
		if err == nil {
			err = errors.New("syscap: shared capture stopped")
		}
		return err
	}
}

// RingSize is the shared capture's ring buffer size in bytes, as the
// kernel made it.
func (sub *Sub) RingSize() (int, error) {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	return sub.s.c.RingSize()
}

// Programs are the capture's programs by name, for bpfrt.Stats.
func (sub *Sub) Programs() map[string]*ebpf.Program {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	return sub.s.c.Programs()
}

// PollLost reports the capture's losses counted in the kernel since the
// last poll (Capture.PollLost) to every consumer, now rather than at the
// next sweep: consumers call it each report period.
func (sub *Sub) PollLost() error {
	sub.s.mu.Lock()
	c := sub.s.c
	sub.s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.PollLost()
}

// AttachOpenSSL attaches the capture's TLS uprobes to an OpenSSL file
// (see Capture.AttachOpenSSL); the uprobes stay while a consumer that
// attached some has not detached.
func (sub *Sub) AttachOpenSSL(path string) (bool, error) {
	c := sub.markTLS()
	return c.AttachOpenSSL(path)
}

// AttachGoTLS attaches the capture's Go crypto/tls uprobes to a Go
// executable (see Capture.AttachGoTLS).
func (sub *Sub) AttachGoTLS(path string) (bool, error) {
	c := sub.markTLS()
	return c.AttachGoTLS(path)
}

func (sub *Sub) markTLS() *Capture {
	sub.s.mu.Lock()
	defer sub.s.mu.Unlock()
	sub.tls = true
	return sub.s.c
}

// DetachTLS says the consumer no longer wants TLS: the uprobes are
// removed when no other consumer does.
func (sub *Sub) DetachTLS() error {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return sub.detachTLSLocked()
}

func (sub *Sub) detachTLSLocked() error {
	s := sub.s
	if !sub.tls {
		return nil
	}
	sub.tls = false
	for _, o := range s.subs {
		if o.tls {
			return nil
		}
	}
	return s.c.DetachTLS()
}

// Close removes the consumer; the last one closes the capture (after its
// Run returned). Idempotent. The caller must not hold a lock its handler
// takes: the capture may be delivering a record to it, and the last
// Close waits for the capture to stop.
func (sub *Sub) Close() error {
	s := sub.s
	s.mu.Lock()
	if sub.closed {
		s.mu.Unlock()
		return nil
	}
	sub.closed = true
	err := sub.detachTLSLocked()
	s.subs = slices.DeleteFunc(s.subs, func(o *Sub) bool { return o == sub })
	s.hmu.Lock()
	for id, owners := range s.owners {
		if rest := slices.DeleteFunc(slices.Clone(owners), func(o *Sub) bool { return o == sub }); len(rest) == 0 {
			delete(s.owners, id)
		} else {
			s.owners[id] = rest
		}
	}
	s.hmu.Unlock()
	if len(s.subs) > 0 {
		if aerr := s.applyLocked(); aerr != nil && !s.failedLocked() {
			err = errors.Join(err, aerr)
		}
		s.mu.Unlock()
		return err
	}
	c, cancel, done := s.c, s.cancel, s.done
	s.c, s.cancel = nil, nil
	s.mu.Unlock()
	cancel()
	<-done
	s.hmu.Lock()
	clear(s.owners)
	s.hmu.Unlock()
	return errors.Join(err, c.Close())
}

// sharedHandler dispatches the capture's records to the consumers.
type sharedHandler struct{ s *Shared }

func (h sharedHandler) Conn(c *Conn) {
	s := h.s
	var owners []*Sub
	s.mu.Lock()
	for _, sub := range s.subs {
		if !slices.Contains(sub.cfg.Protocols, c.Proto) {
			continue
		}
		if c.SSL && !sub.tls {
			continue // another consumer's TLS uprobes: not this one's
		}
		if sub.filter && !sub.targets.Observed(int(c.TGID)) && (!sub.atReport || !unsettled(sub.targets, c.TS)) {
			continue // not observed, and not possibly about to be
		}
		owners = append(owners, sub)
	}
	s.mu.Unlock()
	s.hmu.Lock()
	if len(owners) > 0 {
		s.owners[c.ID] = owners
	} else {
		delete(s.owners, c.ID)
	}
	s.hmu.Unlock()
	for _, sub := range owners {
		sub.h.Conn(c)
	}
}

// unsettled reports whether t (a snoop.Set) may still come to observe the
// process that made a connection recognised at ts.
func unsettled(t snoop.Targets, ts uint64) bool {
	s, ok := t.(snoop.Settler)
	return ok && !s.Settled(ts)
}

func (h sharedHandler) Data(d *Data) {
	s := h.s
	s.hmu.Lock()
	owners := s.owners[d.ConnID]
	s.hmu.Unlock()
	for _, sub := range owners {
		sub.h.Data(d)
	}
}

func (h sharedHandler) Close(c *Close) {
	s := h.s
	s.hmu.Lock()
	owners := s.owners[c.ConnID]
	delete(s.owners, c.ConnID)
	s.hmu.Unlock()
	for _, sub := range owners {
		sub.h.Close(c)
	}
}

// Protocols reports the protocols a set of consumers' configs trace, for
// tests and logs.
func (s *Shared) Protocols() []l7.Protocol {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied.Protocols)
}
