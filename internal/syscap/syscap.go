// Package syscap captures what processes send and receive on their TCP and
// UDP sockets, from tracepoints (no kprobes): for each connection it infers
// the L7 protocol in the kernel from the first bytes, and for connections
// of an enabled protocol it delivers the connection's addresses once
// (Conn), then every read and write with a prefix of its bytes (Data),
// then its close (Close). It is the one syscall capture of galago: the l7
// probe reads it, and so do the probes that need the same stream (ksli,
// postgre_sli, kafka; proc and tprofiling load its statistics sections).
//
// Hooks: the data syscalls are taken inside the socket layer, by tp_btf
// programs on sock_send_length and sock_recv_length (Linux 6.3+), which
// fire in every send and receive with the socket and read the syscall's
// arguments from the saved user registers: their dispatch costs ~40 ns
// where a syscalls:sys_exit_<name> program's costs ~160 ns on the
// development VM, and a known connection needs no fd table walk
// (BenchmarkCaptureCharged). One program at syscall exit takes what they
// cannot: a datagram's recvfrom/recvmsg (its source address reaches the
// caller after the hook; attached only while DNS, the one datagram
// protocol, is enabled, as recv() is recvfrom), recvmmsg/sendmmsg (the
// hook does not say which message it is) and close. Where the kernel lacks the sock tracepoints
// (one log line), or with Options.NoSockHooks, the exit program takes
// every data syscall (read, write, readv, writev, recvfrom, sendto,
// recvmsg, sendmsg, recvmmsg, sendmmsg) as well.
//
// Attachment of the exit program (attach.go, AttachMode): by default a
// tracepoint program on syscalls:sys_exit_<name> of each syscall it
// handles, so every other syscall of every process runs no program; the
// proc statistics and tprofiling attach their enter and exit programs the
// same way for the syscalls of their enabled classes, and keep the raw
// sys_exit only for the failure count of every syscall. Where tracefs is
// not mounted galago mounts it (root); where it cannot, or the kernel has
// no syscall events, the tp_btf programs on the raw sys_enter/sys_exit
// tracepoints are used (one log line), with the same bodies.
// GALAGO_SYSCAP_ATTACH=raw|syscalls forces a mode.
//
// Cost model: in raw mode every syscall of every process pays the program
// entry and one switch on the syscall number at exit (~70 ns of BPF here);
// per syscall, only the kernel's check of its syscall bitmap. A send or
// receive pays the snooper filter and one lookup of its (process, fd) (a
// new fd a read of the fd table); a socket that is not L7 of interest
// stops there; a traced connection pays one ring buffer record per
// syscall, sized to what it captures.
//
// Limits: the first chunk of each turn (a run of chunks in one direction)
// keeps up to Config.Cap bytes, later chunks of the turn Config.ContCap;
// parsers step over the rest by the lengths protocols declare (l7.Chunk).
// The protocols in Config.Whole (asked by a consumer: Kafka, for the kafka
// probe's record counts) keep every chunk whole up to Config.WholeMax
// bytes instead, sent in CaptureMax-byte records and joined again before
// the handler (whole.go); their cost grows with the bytes they move.
// TLS connections are ignored here (their plaintext comes from uprobes).
// Data moved by sendfile/splice is not seen. 32-bit (ia32) processes'
// syscalls are not told apart from 64-bit ones.
package syscap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/snoop"
)

// Handler receives the capture's records, on the reading goroutine, in
// kernel order per CPU (a connection's records are in order: its process
// runs its syscalls one after another on any CPU, and the ring buffer is
// shared). The records passed are only valid during the call (the
// capture reuses them): a handler copies what it keeps.
type Handler interface {
	Conn(c *Conn)
	Data(d *Data)
	Close(c *Close)
}

// Config is the run-time configuration.
type Config struct {
	// Protocols are traced; a connection of another protocol is ignored.
	Protocols []l7.Protocol
	// Cap is how many bytes of a turn's first chunk are captured, ContCap
	// of its later chunks (0: defaults; at most CaptureMax).
	Cap, ContCap int
	// Whole are protocols whose chunks are captured whole, up to WholeMax
	// bytes each (0: DefaultWholeMax; at most WholeMaxLimit), in records
	// of CaptureMax bytes joined again before the handler sees them (see
	// whole.go).
	Whole    []l7.Protocol
	WholeMax int
}

// Defaults of Config.
const (
	DefaultCap     = CaptureMax
	DefaultContCap = 256
	// SweepInterval is how often connections of exited processes are
	// looked for (a process that exits closes its sockets without close()).
	SweepInterval = 10 * time.Second
)

// Options configure Open.
type Options struct {
	Log     *slog.Logger
	Handler Handler
	// OnLost receives records lost to a full ring buffer, sockets not
	// tracked because the connection table was full, and new processes
	// that could not be marked pending by the snooper filter.
	OnLost func(n uint64)
	// HostPath roots /proc for the sweep of exited processes ("/" if empty).
	HostPath string
	// Attach is how the syscall program is attached (AttachAuto: per
	// syscall where the kernel allows).
	Attach AttachMode
	// NoSockHooks reads every data syscall at its exit, as on kernels
	// without the sock_send_length/sock_recv_length tracepoints (tests
	// run both paths).
	NoSockHooks bool
	// RingSize is the ring buffer's size in bytes (0: DefaultRingSize): a
	// power of 2 from MinRingSize to MaxRingSize. Records of bursts the
	// reader cannot keep up with are lost (counted) once it is full.
	RingSize int
}

// Bounds of Options.RingSize.
const (
	DefaultRingSize = 4 << 20
	MinRingSize     = 1 << 20
	MaxRingSize     = 256 << 20
)

// CheckRingSize says why n bytes is not a valid Options.RingSize.
func CheckRingSize(n int) error {
	if n < MinRingSize || n > MaxRingSize || n&(n-1) != 0 {
		return fmt.Errorf("syscap: ring buffer size %d bytes: must be a power of 2 from %d MiB to %d MiB", n, MinRingSize>>20, MaxRingSize>>20)
	}
	return nil
}

// Capture is a loaded and attached capture.
type Capture struct {
	opts   Options
	objs   syscapObjects
	exit   *sysHook
	socks  []link.Link // the sock hooks (syscap_sock_send, syscap_sock_recv); nil where the kernel lacks them
	reader *bpfrt.Reader
	filter *bpfrt.FilterSync

	// hmu serialises the handler's calls: records come from the reader,
	// closes of exited processes' connections from the sweep.
	hmu    sync.Mutex
	mu     sync.Mutex
	traced map[uint64]uint64 // (tgid << 32 | fd) -> connection id, from Conn records
	byID   map[uint64]uint64 // connection id -> key
	goneAt map[uint32]int    // tgid -> sweep that first found it gone
	sweeps int
	// lostMu guards the loss counters' last seen sums (PollLost runs from
	// the sweep and from consumers).
	lostMu   sync.Mutex
	lostSeen uint64
	sslSeen  uint64
	data     Data  // reused for every Data record
	conn     Conn  // reused for every Conn record (a local escapes: one allocation per connection)
	close    Close // reused for every Close record
	joins    joins
	tlsOn    bool
	tlsFiles map[fileID][]link.Link // TLS uprobes by library file (nil: none to attach)
	goFiles  map[fileID][]link.Link // Go TLS uprobes by executable (nil: none to attach)
}

// Open checks the hook, loads and attaches the capture. Nothing is traced
// until SetConfig enables protocols.
func Open(opts Options) (*Capture, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Handler == nil {
		return nil, errors.New("syscap: no handler")
	}
	if opts.HostPath == "" {
		opts.HostPath = "/"
	}
	if opts.RingSize == 0 {
		opts.RingSize = DefaultRingSize
	}
	if err := CheckRingSize(opts.RingSize); err != nil {
		return nil, err
	}
	if err := bpfrt.HaveTPBTF("sys_exit"); err != nil {
		return nil, err
	}
	mode, err := resolveMode(opts.Log, opts.Attach)
	if err != nil {
		return nil, err
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("syscap: load spec: %w", err)
	}
	spec.Maps["events"].MaxEntries = uint32(opts.RingSize)
	// The body is verified once, in the attachment the mode uses: the
	// other program is loaded empty (never attached), which saves the
	// verifier's seconds for a second copy of the body.
	unused := "syscap_sc_exit"
	if mode == AttachSyscalls {
		unused = "syscap_sys_exit"
	}
	spec.Programs[unused].Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	// Wake the reader every ~1000 records (or at a quarter full): a busy
	// connection makes tens of thousands of records a second, and a wake-up
	// (an IPI, the reader's epoll return and a goroutine switch) costs as
	// much as reading a hundred records. The reader's deadline bounds the
	// delay of a quiet ring.
	wake := bpfrt.Wakeup{Records: 1024, RecordSize: dataHdrSize + 128, FillPercent: 25}
	if err := bpfrt.ApplyWakeup(spec, "events", wake); err != nil {
		return nil, fmt.Errorf("syscap: %w", err)
	}
	c := &Capture{opts: opts, traced: map[uint64]uint64{}, byID: map[uint64]uint64{}, goneAt: map[uint32]int{}, tlsFiles: map[fileID][]link.Link{}, goFiles: map[fileID][]link.Link{}}
	if err := spec.LoadAndAssign(&c.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			opts.Log.Error("syscap: verifier", "log", fmt.Sprintf("%+v", ve))
		}
		return nil, fmt.Errorf("syscap: load BPF object: %w", err)
	}
	if c.filter, err = bpfrt.NewFilterSync(bpfrt.FilterObjects{
		Mode: c.objs.GalagoFilterCfg, TGIDs: c.objs.FilterTgids, Cgroups: c.objs.FilterCgroups,
		Pending: c.objs.FilterPending, Decided: c.objs.FilterDecided, Lost: c.objs.FilterPendingLost,
		ForkProgram: c.objs.GalagoFilterFork, ExecProgram: c.objs.GalagoFilterExec,
	}, opts.OnLost); err != nil {
		c.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	if err := c.SetConfig(Config{}); err != nil {
		c.Close()
		return nil, err
	}
	c.reader, err = bpfrt.NewReader(bpfrt.ReaderConfig{
		Ring: c.objs.Events, Lost: c.objs.LostEvents,
		Wakeup: wake,
		Handle: c.handle, OnLost: opts.OnLost,
		OnError: func(err error) { opts.Log.Warn("syscap: bad record", "err", err) },
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("syscap: %w", err)
	}
	sockHooks := !opts.NoSockHooks && c.attachSockHooks()
	c.exit = newSysHook("exit", mode, c.objs.SyscapSysExit, c.objs.SyscapScExit)
	if err := c.exit.set(false, exitSyscalls(sockHooks, false)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// sockHooksLog says once that the kernel lacks the sock tracepoints.
var sockHooksLog sync.Once

// attachSockHooks attaches the programs on the sock_send_length and
// sock_recv_length tracepoints (Linux 6.3+), which then take the data
// syscalls but a datagram's recvfrom/recvmsg and the *mmsg calls, and
// tells the sys_exit program so. Where they cannot be attached, sys_exit
// takes every data syscall, as before them (one log line).
func (c *Capture) attachSockHooks() bool {
	var links []link.Link
	fail := func() bool {
		for _, l := range links {
			l.Close()
		}
		return false
	}
	for _, p := range []*ebpf.Program{c.objs.SyscapSockSend, c.objs.SyscapSockRecv} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			sockHooksLog.Do(func() {
				c.opts.Log.Info("syscap: sock_send_length/sock_recv_length tracepoints unavailable; data syscalls are read at syscall exit", "err", err)
			})
			return fail()
		}
		links = append(links, l)
	}
	if err := c.objs.SyscapSockHooks.Set(uint32(1)); err != nil {
		c.opts.Log.Warn("syscap: sock hooks not enabled", "err", err)
		return fail()
	}
	c.socks = links
	return true
}

// RingSize is the size in bytes of the ring buffer the kernel made.
func (c *Capture) RingSize() (int, error) {
	info, err := c.objs.Events.Info()
	if err != nil {
		return 0, fmt.Errorf("syscap: ring buffer info: %w", err)
	}
	return int(info.MaxEntries), nil
}

// Programs are the capture's programs by name, for bpfrt.Stats.
func (c *Capture) Programs() map[string]*ebpf.Program {
	progs := c.filter.Programs()
	progs["syscap_sys_exit"] = c.objs.SyscapSysExit
	progs["syscap_sc_exit"] = c.objs.SyscapScExit
	progs["syscap_sock_send"] = c.objs.SyscapSockSend
	progs["syscap_sock_recv"] = c.objs.SyscapSockRecv
	progs["ssl_write_enter"] = c.objs.SslWriteEnter
	progs["ssl_read_enter"] = c.objs.SslReadEnter
	progs["ssl_write_ex_enter"] = c.objs.SslWriteExEnter
	progs["ssl_read_ex_enter"] = c.objs.SslReadExEnter
	progs["ssl_return"] = c.objs.SslReturn
	progs["go_tls_write_enter"] = c.objs.GoTlsWriteEnter
	progs["go_tls_read_enter"] = c.objs.GoTlsReadEnter
	progs["go_tls_return"] = c.objs.GoTlsReturn
	return progs
}

// SetConfig applies the protocols and capture sizes.
func (c *Capture) SetConfig(cfg Config) error {
	if err := checkWhole(cfg); err != nil {
		return err
	}
	mask := protoMask(cfg.Protocols)
	capFirst, capCont := cfg.Cap, cfg.ContCap
	if capFirst <= 0 {
		capFirst = DefaultCap
	}
	if capCont <= 0 {
		capCont = DefaultContCap
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range []struct {
		v   *ebpf.Variable
		val uint32
	}{
		{c.objs.SyscapProtos, mask},
		{c.objs.SyscapCap, uint32(min(capFirst, CaptureMax))},
		{c.objs.SyscapContCap, uint32(min(capCont, CaptureMax))},
		{c.objs.SyscapWholeProtos, protoMask(cfg.Whole)},
		{c.objs.SyscapWholeMax, uint32(wholeMax(cfg.WholeMax))},
	} {
		if err := v.v.Set(v.val); err != nil {
			return fmt.Errorf("syscap: set config: %w", err)
		}
	}
	if c.exit != nil {
		// DNS is the one datagram protocol.
		if err := c.exit.set(false, exitSyscalls(c.socks != nil, mask&(1<<l7.DNS) != 0)); err != nil {
			return err
		}
	}
	return nil
}

// setTLSLocked tells the syscall program whether TLS uprobes are attached.
func (c *Capture) setTLSLocked(on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if err := c.objs.SyscapSsl.Set(v); err != nil {
		return fmt.Errorf("syscap: set config: %w", err)
	}
	c.tlsOn = on
	return nil
}

// SetTargets applies the snoopers (nil: every process).
func (c *Capture) SetTargets(t snoop.Targets) error { return c.filter.Sync(t) }

// Run reads records, follows the snoopers and sweeps exited processes'
// connections until ctx is done or one of them fails.
func (c *Capture) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 3)
	for _, fn := range []func(context.Context) error{c.reader.Run, c.filter.Run, c.sweepLoop} {
		go func() {
			err := fn(ctx)
			cancel()
			errs <- err
		}()
	}
	var first error
	for range 3 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close detaches and unloads everything. Idempotent; call it after Run
// has returned.
func (c *Capture) Close() error {
	var errs []error
	c.mu.Lock()
	for id, links := range c.tlsFiles {
		closeAll(links)
		delete(c.tlsFiles, id)
	}
	for id, links := range c.goFiles {
		closeAll(links)
		delete(c.goFiles, id)
	}
	c.mu.Unlock()
	for _, l := range c.socks {
		errs = append(errs, l.Close())
	}
	c.socks = nil
	if c.exit != nil {
		errs = append(errs, c.exit.close())
		c.exit = nil
	}
	if c.filter != nil {
		errs = append(errs, c.filter.Close())
		c.filter = nil
	}
	if c.reader != nil {
		errs = append(errs, c.reader.Close())
		c.reader = nil
	}
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}

func (c *Capture) handle(raw []byte) error {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	switch recordType(raw) {
	case recData:
		if err := decodeData(raw, &c.data); err != nil {
			return err
		}
		c.deliverData(&c.data)
		c.data.Bytes = nil
	case recConn:
		var err error
		if c.conn, err = decodeConn(raw); err != nil {
			return err
		}
		conn := &c.conn
		key := uint64(conn.TGID)<<32 | uint64(conn.FD)
		c.mu.Lock()
		old, reused := c.traced[key]
		if reused {
			delete(c.byID, old)
		}
		c.traced[key] = conn.ID
		c.byID[conn.ID] = key
		c.mu.Unlock()
		if reused {
			// The fd was reused without a CLOSE record (the kernel sends
			// one when it sees the reuse; this is the fallback).
			c.close = Close{ConnID: old, TGID: conn.TGID}
			c.opts.Handler.Close(&c.close)
		}
		c.opts.Handler.Conn(conn)
	case recClose:
		var err error
		if c.close, err = decodeClose(raw); err != nil {
			return err
		}
		cl := &c.close
		c.mu.Lock()
		if key, ok := c.byID[cl.ConnID]; ok {
			delete(c.byID, cl.ConnID)
			if c.traced[key] == cl.ConnID {
				delete(c.traced, key)
			}
		}
		c.mu.Unlock()
		c.flushWhole(cl.ConnID)
		c.opts.Handler.Close(cl)
	default:
		return fmt.Errorf("syscap: record of type %d", recordType(raw))
	}
	return nil
}

func (c *Capture) sweepLoop(ctx context.Context) error {
	t := time.NewTicker(SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.sweep(); err != nil {
				return err
			}
		}
	}
}

// sweep forgets the connections of processes that no longer exist (exit
// closes sockets without a close() syscall) and reports the traced ones as
// closed one sweep after their process was found gone (so that records
// still in the ring come first); it also reports sockets not tracked
// because the table was full.
func (c *Capture) sweep() error {
	c.sweeps++
	alive := map[uint32]bool{}
	isAlive := func(tgid uint32) bool {
		ok, seen := alive[tgid]
		if !seen {
			_, err := os.Stat(filepath.Join(c.opts.HostPath, "proc", strconv.FormatUint(uint64(tgid), 10)))
			ok = err == nil
			alive[tgid] = ok
		}
		return ok
	}
	tgidOf := func(k uint64) uint32 { return uint32(k >> 32) }
	if err := sweepGone(c.objs.Conns, tgidOf, isAlive); err != nil {
		return err
	}
	// A process that exits in the middle of a TLS call (a server's
	// goroutine blocked in Read) leaves its entry: it would hold a slot
	// for good, and a full table loses calls.
	if err := sweepGone(c.objs.SslCalls, tgidOf, isAlive); err != nil {
		return err
	}
	if err := sweepGone(c.objs.GoTlsCalls, func(k goTLSKey) uint32 { return k.TGID }, isAlive); err != nil {
		return err
	}
	var closed []Close
	c.mu.Lock()
	for k, id := range c.traced {
		tgid := uint32(k >> 32)
		if isAlive(tgid) {
			delete(c.goneAt, tgid)
			continue
		}
		first, ok := c.goneAt[tgid]
		if !ok {
			c.goneAt[tgid] = c.sweeps
			continue
		}
		if first < c.sweeps {
			delete(c.traced, k)
			delete(c.byID, id)
			closed = append(closed, Close{ConnID: id, TGID: tgid})
		}
	}
	for tgid, first := range c.goneAt {
		if first < c.sweeps-1 {
			delete(c.goneAt, tgid)
		}
	}
	c.mu.Unlock()
	c.hmu.Lock()
	c.flushStaleWhole()
	for i := range closed {
		c.flushWhole(closed[i].ConnID)
		c.opts.Handler.Close(&closed[i])
	}
	c.hmu.Unlock()
	return c.PollLost()
}

// goTLSKey is go_tls_calls' key (struct go_tls_key).
type goTLSKey struct {
	TGID uint32
	_    uint32
	G    uint64
}

// sweepGone deletes the entries of a table keyed by process (conns,
// ssl_calls, go_tls_calls) whose process is gone.
func sweepGone[K comparable](m *ebpf.Map, tgid func(K) uint32, alive func(uint32) bool) error {
	var (
		k     K
		stale []K
	)
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		if !alive(tgid(k)) {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("syscap: sweep %s: %w", m, err)
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("syscap: sweep %s: %w", m, err)
		}
	}
	return nil
}

// PollLost reports (Options.OnLost) the sockets not tracked because the
// connection table was full and the TLS calls whose socket was not found,
// counted in the kernel since the last poll. The sweep polls; consumers
// may poll more often (each report period) so that short runs see them.
func (c *Capture) PollLost() error {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	for _, m := range []struct {
		m    *ebpf.Map
		seen *uint64
		name string
	}{{c.objs.ConnLost, &c.lostSeen, "conn_lost"}, {c.objs.SslLost, &c.sslSeen, "ssl_lost"}} {
		var per []uint64
		if err := m.m.Lookup(uint32(0), &per); err != nil {
			return fmt.Errorf("syscap: read %s: %w", m.name, err)
		}
		var sum uint64
		for _, n := range per {
			sum += n
		}
		if d := sum - *m.seen; d > 0 && c.opts.OnLost != nil {
			c.opts.OnLost(d)
		}
		*m.seen = sum
	}
	return nil
}
