package syscap

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/snoop"
)

// pidTargets observes one pid.
type pidTargets int

func (p pidTargets) Mode() snoop.Mode             { return snoop.Whitelist }
func (p pidTargets) Observed(pid int) bool        { return pid == int(p) }
func (p pidTargets) PIDs() []int                  { return []int{int(p)} }
func (p pidTargets) CgroupIDs() []uint64          { return nil }
func (p pidTargets) Labels(int) map[string]string { return nil }
func (p pidTargets) Changed() <-chan struct{}     { return nil }

// counter counts a consumer's records per connection.
type counter struct {
	conns, data, closes map[uint64]int
}

func newCounter() *counter {
	return &counter{conns: map[uint64]int{}, data: map[uint64]int{}, closes: map[uint64]int{}}
}
func (c *counter) Conn(x *Conn)   { c.conns[x.ID]++ }
func (c *counter) Data(x *Data)   { c.data[x.ConnID]++ }
func (c *counter) Close(x *Close) { c.closes[x.ConnID]++ }

// TestSharedDispatch: each connection's records go to the consumers that
// trace its protocol and observe its process (checked in user space only
// for a consumer whose snoopers the kernel does not apply), TLS ones only
// to consumers that attached TLS uprobes.
func TestSharedDispatch(t *testing.T) {
	s := NewShared(Options{})
	ca, cb, cc := newCounter(), newCounter(), newCounter()
	a := &Sub{s: s, h: ca, cfg: Config{Protocols: []l7.Protocol{l7.Redis}}, targets: pidTargets(1), filter: true}
	b := &Sub{s: s, h: cb, cfg: Config{Protocols: []l7.Protocol{l7.Redis, l7.PgSQL}}, tls: true}
	c := &Sub{s: s, h: cc, cfg: Config{Protocols: []l7.Protocol{l7.HTTP}}}
	s.subs = []*Sub{a, b, c}
	h := sharedHandler{s}
	conns := []Conn{
		{ID: 1, TGID: 1, Proto: l7.Redis},            // a, b
		{ID: 2, TGID: 2, Proto: l7.Redis},            // b (a does not observe 2)
		{ID: 3, TGID: 1, Proto: l7.PgSQL},            // b
		{ID: 4, TGID: 1, Proto: l7.Redis, SSL: true}, // b (a attached no TLS uprobes)
		{ID: 5, TGID: 1, Proto: l7.MySQL},            // nobody
	}
	for i := range conns {
		h.Conn(&conns[i])
		h.Data(&Data{ConnID: conns[i].ID})
		h.Data(&Data{ConnID: conns[i].ID})
	}
	for i := range conns {
		h.Close(&Close{ConnID: conns[i].ID})
	}
	want := map[*counter][]uint64{ca: {1}, cb: {1, 2, 3, 4}, cc: nil}
	for cn, ids := range want {
		if len(cn.conns) != len(ids) {
			t.Errorf("consumer got connections %v, want %v", cn.conns, ids)
		}
		for _, id := range ids {
			if cn.conns[id] != 1 || cn.data[id] != 2 || cn.closes[id] != 1 {
				t.Errorf("connection %d: %d conn, %d data, %d close records", id, cn.conns[id], cn.data[id], cn.closes[id])
			}
		}
	}
	if len(s.owners) != 0 {
		t.Errorf("owners left after the closes: %v", s.owners)
	}
}

// settledPID observes one pid; its snoopers have handled the lifecycle
// events up to handled.
type settledPID struct {
	pidTargets
	handled uint64
}

func (s settledPID) Settled(ts uint64) bool { return s.handled >= ts }

// TestSharedDispatchUnsettled: a consumer that checks its snoopers again
// at report also gets the connections of a process they do not observe
// while they have not settled about it; one that does not, never.
func TestSharedDispatchUnsettled(t *testing.T) {
	s := NewShared(Options{})
	ca, cb := newCounter(), newCounter()
	targets := settledPID{pidTargets: 1, handled: 100}
	a := &Sub{s: s, h: ca, cfg: Config{Protocols: []l7.Protocol{l7.HTTP}}, targets: targets, filter: true}
	a.CheckedAtReport()
	b := &Sub{s: s, h: cb, cfg: Config{Protocols: []l7.Protocol{l7.HTTP}}, targets: targets, filter: true}
	s.subs = []*Sub{a, b}
	h := sharedHandler{s}
	for _, c := range []Conn{
		{ID: 1, TGID: 1, TS: 150, Proto: l7.HTTP}, // observed: both
		{ID: 2, TGID: 2, TS: 50, Proto: l7.HTTP},  // settled, not observed: neither
		{ID: 3, TGID: 2, TS: 150, Proto: l7.HTTP}, // not settled: a only
	} {
		h.Conn(&c)
	}
	if len(ca.conns) != 2 || ca.conns[1] != 1 || ca.conns[3] != 1 {
		t.Errorf("consumer checking at report got %v, want connections 1 and 3", ca.conns)
	}
	if len(cb.conns) != 1 || cb.conns[1] != 1 {
		t.Errorf("consumer not checking at report got %v, want connection 1", cb.conns)
	}
}
