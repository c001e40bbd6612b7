package snoop

// Holdback decides, at each report of a probe that checks the snoopers
// when it reports, what becomes of the rows of a process they do not
// observe. The kernel observes a new process of a dynamic set from its
// fork or exec on, before user space has classified it, so its rows can be
// ready before its fork and exec events have reached the set: Observed
// then says no for a process about to join. Such rows are held for the
// next report while the set is not settled as of them (Set.Settled), then
// reported if the process turned out observed and dropped if not; after
// MaxHeld reports in a row they are dropped and the probe counts them as
// lost. Rows of a process the set is settled about are dropped at once.
//
// A report asks Begin for a Gate, tells it the newest time of each
// process's rows where it knows it (Note), asks Verdict per process, and
// calls End. A Holdback is one probe's; it is not safe for concurrent use.
type Holdback struct {
	held   map[uint32]heldRows
	round  map[uint32]Verdict // this report's verdicts on processes not observed
	newest map[uint32]uint64  // this report's Notes
}

type heldRows struct {
	since uint64 // the time the set must be settled as of (CLOCK_MONOTONIC ns)
	times int    // reports in a row that held them
}

// MaxHeld bounds the reports in a row that hold a process's rows.
const MaxHeld = 3

// Verdict is what a report does with a process's rows.
type Verdict uint8

const (
	// Report the rows: the process is observed.
	Report Verdict = iota
	// Drop the rows: the process is not observed.
	Drop
	// Hold the rows for the next report.
	Hold
	// Expire: drop the rows and count them as lost, held MaxHeld times
	// without the set settling.
	Expire
)

// Settler is implemented by Set: Settled reports whether Observed's
// answers are final for what processes did up to ts (CLOCK_MONOTONIC ns).
type Settler interface{ Settled(ts uint64) bool }

// Gate is one report's questions to a Holdback.
type Gate struct {
	h       *Holdback
	t       Targets
	settled func(ts uint64) bool
	now     uint64
}

// Begin starts a report: t is the probe's snoopers (nil: every process
// is observed).
func (h *Holdback) Begin(t Targets) Gate {
	if h.round == nil {
		h.held, h.round, h.newest = map[uint32]heldRows{}, map[uint32]Verdict{}, map[uint32]uint64{}
	}
	clear(h.round)
	clear(h.newest)
	g := Gate{h: h, t: t, now: monoNow()}
	if s, ok := t.(Settler); ok {
		g.settled = s.Settled
	}
	return g
}

// Note tells the report that tgid has rows as new as ts (CLOCK_MONOTONIC
// ns). Notes come before the process's Verdict; a process without one is
// taken to have rows as new as the report.
func (g Gate) Note(tgid uint32, ts uint64) {
	if g.settled == nil || ts <= g.h.newest[tgid] || g.t.Observed(int(tgid)) {
		return
	}
	g.h.newest[tgid] = ts
}

// Verdict says what the report does with tgid's rows. A report decides
// once per process; later calls return the first answer.
func (g Gate) Verdict(tgid uint32) Verdict {
	if g.t == nil || g.t.Observed(int(tgid)) {
		return Report
	}
	if v, ok := g.h.round[tgid]; ok {
		return v
	}
	v := Drop
	if g.settled != nil {
		h, held := g.h.held[tgid]
		last, noted := g.h.newest[tgid]
		switch {
		case !held && noted:
			h.since = last
		case !held:
			h.since = g.now
		case last > h.since:
			h.since = last
		}
		switch {
		case g.settled(h.since):
		case h.times < MaxHeld:
			h.times++
			g.h.held[tgid] = h
			v = Hold
		default:
			v = Expire
		}
	}
	g.h.round[tgid] = v
	return v
}

// End finishes a report: processes it did not hold are forgotten.
func (h *Holdback) End() {
	for tgid := range h.held {
		if h.round[tgid] != Hold {
			delete(h.held, tgid)
		}
	}
}

// Sift is one report over rows that a probe starts afresh each period:
// it removes from rows those not reported now, moving the held ones into
// next (the next period's rows), and returns how many it expired.
func Sift[K comparable, V any](h *Holdback, t Targets, rows, next map[K]V, tgid func(K) uint32) (expired uint64) {
	g := h.Begin(t)
	defer h.End()
	for k, v := range rows {
		switch g.Verdict(tgid(k)) {
		case Report:
			continue
		case Hold:
			next[k] = v
		case Expire:
			expired++
		}
		delete(rows, k)
	}
	return expired
}

// Holding reports whether the last report held any process's rows.
func (h *Holdback) Holding() bool { return len(h.held) > 0 }
