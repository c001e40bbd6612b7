package tcp

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

// synth builds a record without going through the byte encoding (a
// million of them would make the test slow for nothing: the decoder has
// its own tests).
func synth(typ uint32, tgid uint32, cookie uint64, cport uint16, acked, received uint64) conn {
	c := conn{family: afInet, local: netip.MustParseAddr("10.231.1.1"), remot: netip.MustParseAddr("10.231.1.2")}
	c.raw.Type, c.raw.Tgid, c.raw.Cookie, c.raw.Role, c.raw.Family = typ, tgid, cookie, roleClient, afInet
	c.raw.Sport, c.raw.Dport = cport, 80
	c.raw.BytesAcked, c.raw.BytesReceived = acked, received
	c.raw.SegsOut = uint32(acked / 10) // grows with acked
	c.raw.TotalRto = unsetU32
	copy(c.raw.Comm[:], []int8{'w', 'r', 'k'})
	return c
}

// TestAggregatorBounded drives a million connections through the
// aggregator as the probe sees them under connection churn: per step,
// close records of the long connections opened in the previous step (and
// a stale snapshot of each, read before its close was handled), short
// connections seen only by their close record, new long connections in
// the snapshot, and LATE resets, some handled one step after the close.
// The tracked state must be exactly the live connections plus the closes
// of the last step (a fraction of the bound, whatever the total), and the
// rows' counts exact.
func TestAggregatorBounded(t *testing.T) {
	const (
		total   = 1_000_000
		perStep = 20_000 // new connections per sample: half long, half short
		tgids   = 4
	)
	a := newAggregator()
	h := hooksAvail{resets: true}
	var wantTx, wantRx, wantSegs, wantRsts [tgids + 1]uint64
	var gotTx, gotRx, gotSegs, gotRsts [tgids + 1]uint64
	flush := func() {
		for k, l := range a.flush() {
			gotTx[k.tgid] += l.sum.bytesAcked
			gotRx[k.tgid] += l.sum.bytesReceived
			gotSegs[k.tgid] += l.sum.segsOut
			gotRsts[k.tgid] += l.sum.sendRsts
		}
	}
	var prevLong, prevClosed []conn // long connections opened, and closes handled, in the previous step
	next := uint64(1)
	for step := 0; next <= total || len(prevLong) > 0; step++ {
		// LATE resets of every 10th connection closed in the previous
		// step: its row comes from the older generation.
		for i := 0; i < len(prevClosed); i += 10 {
			l := synth(recLate, prevClosed[i].raw.Tgid, prevClosed[i].raw.Cookie, 0, 0, 0)
			l.raw.C.SendRsts = 1
			if !a.late(&l) {
				t.Fatalf("step %d: late record of connection %d (closed one step ago) not attributed", step, l.raw.Cookie)
			}
			wantRsts[l.raw.Tgid]++
		}
		var closed, stale, long []conn
		// The long connections of the previous step close.
		for _, c := range prevLong {
			cl := synth(recClose, c.raw.Tgid, c.raw.Cookie, c.raw.Sport, 2*c.raw.BytesAcked, 2*c.raw.BytesReceived)
			closed = append(closed, cl)
			stale = append(stale, c)
		}
		// New connections: half short (closed before any sample saw them), half long.
		for i := 0; i < perStep && next <= total; i++ {
			tgid := uint32(next%tgids) + 1
			acked, received := next%7919+1, next%104729+1
			if i%2 == 0 {
				closed = append(closed, synth(recClose, tgid, next, uint16(next), acked, received))
			} else {
				long = append(long, synth(recSnapshot, tgid, next, uint16(next), acked, received))
			}
			next++
		}
		for i := range closed {
			a.closed(&closed[i], h)
			r := &closed[i].raw
			wantTx[r.Tgid] += r.BytesAcked
			wantRx[r.Tgid] += r.BytesReceived
			wantSegs[r.Tgid] += uint64(r.SegsOut)
			// Every 10th gets a reset right after its close (same generation).
			if i%10 == 5 {
				l := synth(recLate, r.Tgid, r.Cookie, 0, 0, 0)
				l.raw.C.SendRsts = 1
				if !a.late(&l) {
					t.Fatalf("step %d: late record of connection %d not attributed", step, r.Cookie)
				}
				wantRsts[r.Tgid]++
			}
		}
		// The iterator pass: the new long connections, plus the stale
		// snapshots of those that just closed (read before their close
		// records were handled: must not count again).
		a.snapshot(append(long, stale...), h, false)
		if got, want := a.tracked(), len(long)+len(closed); got != want {
			t.Fatalf("step %d: %d connections tracked, want %d (%d live + %d closed this step)",
				step, got, want, len(long), len(closed))
		}
		if a.tracked() > perStep+perStep/2 || a.conns.len() != len(long) {
			t.Fatalf("step %d: tracked %d (live %d)", step, a.tracked(), a.conns.len())
		}
		if n := a.takeDropped(); n != 0 {
			t.Fatalf("step %d: %d records dropped under the bounds", step, n)
		}
		if step%2 == 1 {
			flush()
		}
		prevLong, prevClosed = long, closed
	}
	flush()
	if n := len(a.keys); n != 0 {
		t.Errorf("%d row keys kept after the last period", n)
	}
	for g := 1; g <= tgids; g++ {
		if gotTx[g] != wantTx[g] || gotRx[g] != wantRx[g] || gotSegs[g] != wantSegs[g] || gotRsts[g] != wantRsts[g] {
			t.Errorf("tgid %d: tx %d rx %d segs_out %d send_rsts %d, want %d %d %d %d",
				g, gotTx[g], gotRx[g], gotSegs[g], gotRsts[g], wantTx[g], wantRx[g], wantSegs[g], wantRsts[g])
		}
	}
	if wantRsts[1] == 0 || wantTx[1] == 0 {
		t.Fatal("the synthetic load produced nothing")
	}
}

// TestAggregatorCaps: beyond maxTracked, new connections are not tracked
// and every record kept out is counted (the probe reports them as lost);
// the tracked ones still count exactly. Beyond maxRows, records of a new
// row are dropped and counted the same way.
func TestAggregatorCaps(t *testing.T) {
	a := newAggregator()
	a.maxTracked, a.maxRows = 100, 1000
	h := hooksAvail{}
	var recs []conn
	for i := uint64(1); i <= 150; i++ {
		recs = append(recs, synth(recSnapshot, 1, i, uint16(i), 10, 20))
	}
	a.snapshot(recs, h, true) // baseline: 100 tracked, 50 dropped
	if got, n := a.tracked(), a.takeDropped(); got != 100 || n != 50 {
		t.Fatalf("baseline: %d tracked, %d dropped; want 100, 50", got, n)
	}
	for i := range recs {
		recs[i].raw.BytesAcked = 15
	}
	a.snapshot(recs, h, false) // 100 count 5 each; the 50 others are still kept out
	if got, n := a.tracked(), a.takeDropped(); got != 100 || n != 50 {
		t.Fatalf("sample: %d tracked, %d dropped; want 100, 50", got, n)
	}
	// A short connection's close record finds no room either.
	short := synth(recClose, 1, 1000, 1000, 7, 7)
	a.closed(&short, h)
	if n := a.takeDropped(); n != 1 {
		t.Fatalf("close of an untracked connection: %d dropped, want 1", n)
	}
	// A tracked connection closing moves to the closed set: no room needed.
	cl := synth(recClose, 1, 1, 1, 18, 20)
	a.closed(&cl, h)
	if got, n := a.tracked(), a.takeDropped(); got != 100 || n != 0 {
		t.Fatalf("close of a tracked connection: %d tracked, %d dropped", got, n)
	}
	rows := a.flush()
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, l := range rows {
		if l.sum.bytesAcked != 100*5+3 {
			t.Errorf("tx_bytes %d, want %d", l.sum.bytesAcked, 100*5+3)
		}
	}
	// Rows: with report_cport each client port is a row.
	b := newAggregator()
	b.maxRows = 10
	b.reportCport = true
	for i := uint64(1); i <= 25; i++ {
		c := synth(recClose, 2, i, uint16(i), 1, 1)
		b.closed(&c, h)
	}
	if rows, n := b.flush(), b.takeDropped(); len(rows) != 10 || n != 15 {
		t.Fatalf("%d rows, %d dropped; want 10, 15", len(rows), n)
	}
}

// TestRawKeyPlainMemory: rawKey has no padding (the map hashes it as plain
// memory, and equal keys are equal bytes).
func TestRawKeyPlainMemory(t *testing.T) {
	var k rawKey
	if got, want := unsafe.Sizeof(k), unsafe.Sizeof(k.client)+unsafe.Sizeof(k.server)+unsafe.Sizeof(k.comm)+
		unsafe.Sizeof(k.tgid)+unsafe.Sizeof(k.clientPort)+unsafe.Sizeof(k.serverPort)+unsafe.Sizeof(k.family)+
		unsafe.Sizeof(k.role); got != want {
		t.Errorf("rawKey is %d bytes, its fields %d: padding", got, want)
	}
}

// BenchmarkAggregatorChurn: the Go cost of one short connection (close
// record of a connection no sample saw, its row known) and of one sample of
// a live connection.
func BenchmarkAggregatorChurn(b *testing.B) {
	a := newAggregator()
	h := hooksAvail{resets: true, hz: true}
	recs := make([]conn, 1000)
	for i := range recs {
		recs[i] = synth(recClose, 1, 0, uint16(i), 100, 100)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c := &recs[i%len(recs)]
		c.raw.Cookie = uint64(i + 1)
		a.closed(c, h)
		if i%10000 == 9999 {
			a.snapshot(nil, h, false)
			a.flush()
		}
	}
}

// TestAggregatorOrphanNotCountedTwice: the samples read the sockets held
// in fd tables, so a connection the application has closed goes unseen
// while the kernel finishes it (FIN_WAIT2 lasts tcp_fin_timeout, 60 s by
// default). Its close record, a minute later, must add only what grew
// since its last sample.
func TestAggregatorOrphanNotCountedTwice(t *testing.T) {
	a := newAggregator()
	a.setSamplePeriod(time.Second)
	h := hooksAvail{resets: true, hz: true}
	a.snapshot([]conn{synth(recSnapshot, 1, 7, 40000, 1000, 100)}, h, false)
	for range 61 { // the orphan's minute in FIN_WAIT2, sampled every second
		a.snapshot(nil, h, false)
	}
	cl := synth(recClose, 1, 7, 40000, 1001, 100)
	a.closed(&cl, h)
	var tx uint64
	for _, l := range a.flush() {
		tx += l.sum.bytesAcked
	}
	if tx != 1001 {
		t.Errorf("tx_bytes %d over the periods' rows, want 1001 (1000 sampled + 1 at close)", tx)
	}
}
