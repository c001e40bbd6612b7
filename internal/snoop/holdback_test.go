package snoop

import (
	"math"
	"testing"
)

// settledTargets is a whitelist of pids whose Settled follows handled.
type settledTargets struct {
	Targets
	members map[int]bool
	handled uint64
}

func (s *settledTargets) Observed(pid int) bool  { return s.members[pid] }
func (s *settledTargets) Settled(ts uint64) bool { return s.handled >= ts }

// TestHoldback: rows of a process not observed are held while the set is
// not settled as of their newest data (or, when the probe does not know
// it, as of the report that first held them), reported once it joins,
// dropped once the set settles without it, and expired after MaxHeld
// reports in a row; without Settled they are dropped at once.
func TestHoldback(t *testing.T) {
	var h Holdback
	if v := h.Begin(nil).Verdict(1); v != Report {
		t.Fatalf("no snoopers: %v, want Report", v)
	}
	h.End()
	s := &settledTargets{members: map[int]bool{1: true}, handled: 100}
	report := func(want map[uint32]Verdict, last map[uint32]uint64) {
		t.Helper()
		g := h.Begin(s)
		for tgid, ts := range last {
			g.Note(tgid, ts)
			g.Note(tgid, ts-1) // an older row changes nothing
		}
		for tgid, w := range want {
			if v := g.Verdict(tgid); v != w {
				t.Fatalf("tgid %d: %v, want %v", tgid, v, w)
			}
			g.Note(tgid, math.MaxUint64)
			if v := g.Verdict(tgid); v != w {
				t.Fatalf("tgid %d asked again: %v, want the first answer %v", tgid, v, w)
			}
		}
		h.End()
	}
	// 2's data is settled (dropped), 3's is not (held), 4's time is
	// unknown: the report's own, which the set is not settled as of yet.
	report(map[uint32]Verdict{1: Report, 2: Drop, 3: Hold, 4: Hold}, map[uint32]uint64{2: 90, 3: 150})
	// 3 joins; the set settles as of the first report: 4 is dropped.
	s.members[3], s.handled = true, math.MaxUint64/2
	report(map[uint32]Verdict{3: Report, 4: Drop}, nil)
	if h.Holding() {
		t.Fatal("still holding after every process was decided")
	}
	// 5 never settles: held MaxHeld times, then expired, then dropped.
	var want []Verdict
	for range MaxHeld {
		want = append(want, Hold)
	}
	want = append(want, Expire, Hold)
	for i, w := range want {
		g := h.Begin(s)
		g.Note(5, math.MaxUint64)
		if v := g.Verdict(5); v != w {
			t.Fatalf("report %d: %v, want %v", i, v, w)
		}
		h.End()
	}
	// Without Settled, rows of a process not observed are dropped.
	plain := &settledTargets{members: map[int]bool{}}
	if v := h.Begin(struct{ Targets }{plain}).Verdict(6); v != Drop {
		t.Fatalf("no Settled: %v, want Drop", v)
	}
}
