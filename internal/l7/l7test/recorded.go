package l7test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// Fixture is a recorded conversation and the exchanges a parser must find
// in it, with the timestamps Chunks(Segs, role, TS0, Step) gives.
type Fixture struct {
	Segs      []Segment
	Want      []l7.Exchange
	TS0, Step uint64
	// Lossy is the capture cap (64, 256 or 4096) at which the fixture is
	// known to lose exchanges (0: none); Hidden lists, per capture cap,
	// the exchanges whose error that capture hides.
	Lossy  int
	Hidden map[int][]int
}

// CheckRecorded runs f through fresh parsers of both roles: whole (exactly
// Want, no desync, no orphan if the parser counts them), re-split at 1, 2,
// 7 and 64 bytes (Want, timestamps compared at 1 byte only: re-split
// chunks take the timestamp of their first byte's chunk) and truncated at
// 64, 256 and 4096 bytes (CheckTruncated).
func CheckRecorded(t *testing.T, newParser func(l7.Role) l7.Parser, f Fixture) {
	t.Helper()
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		chunks := Chunks(f.Segs, role, f.TS0, f.Step)
		t.Run(role.String(), func(t *testing.T) {
			p := newParser(role)
			got := Run(p, chunks)
			if d := Diff(got, f.Want, true); d != "" || p.Desyncs() != 0 || orphans(p) != 0 {
				t.Errorf("whole: desyncs %d orphans %d\n%s", p.Desyncs(), orphans(p), d)
			}
			for _, n := range []int{1, 2, 7, 64} {
				p := newParser(role)
				got := Run(p, Resplit(chunks, n))
				if d := Diff(got, f.Want, n == 1); d != "" || p.Desyncs() != 0 {
					t.Errorf("resplit %d: desyncs %d\n%s", n, p.Desyncs(), d)
				}
				CheckTS(t, got, chunks)
			}
			for _, capture := range []int{64, 256, 4096} {
				p := newParser(role)
				got := Run(p, Truncate(chunks, capture))
				CheckTruncated(t, got, f.Want, p.Desyncs(), f.Lossy == capture, f.Hidden[capture])
				CheckTS(t, got, chunks)
			}
		})
	}
}

// orphans is a parser's count of responses to no request, if it keeps one.
func orphans(p l7.Parser) uint64 {
	if o, ok := p.(interface{ Orphans() uint64 }); ok {
		return o.Orphans()
	}
	return 0
}

// FuzzRun feeds a fuzz input (FuzzChunks) to a fresh parser, flushes it,
// and checks what holds for any input: every exchange's timestamps are
// its chunks', APIs are at most 128 bytes, and there are no more exchanges
// than the bytes allow (one per minMsg bytes, the protocol's smallest
// message). An exchange without a request must satisfy noRequest (nil:
// none may). It returns the parser for the protocol's own checks.
func FuzzRun(t *testing.T, b []byte, newParser func(l7.Role) l7.Parser, minMsg int, noRequest func(l7.Exchange) bool) l7.Parser {
	t.Helper()
	role, chunks := FuzzConversation(b)
	p := newParser(role)
	var out []l7.Exchange
	seen := map[uint64]bool{}
	total := 0
	for _, c := range chunks {
		seen[c.TS] = true
		total += c.Size
		out = p.Feed(c, out)
	}
	out = p.Flush(out)
	if len(out) > total/minMsg+1 {
		t.Fatalf("%d exchanges from %d bytes", len(out), total)
	}
	for _, e := range out {
		if !e.HasRequest && (noRequest == nil || !noRequest(e)) {
			t.Fatalf("exchange without a request: %+v", e)
		}
		if (e.HasRequest && !seen[e.Start]) || (e.HasResponse && !seen[e.End]) {
			t.Fatalf("exchange not from the chunks: %+v", e)
		}
		if len(e.API) > 128 {
			t.Fatalf("API of %d bytes", len(e.API))
		}
	}
	return p
}

// WriteFixture writes segs to path in the fixture format, after comment
// (what produced them).
func WriteFixture(tb testing.TB, path, comment string, segs []Segment) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := Write(f, comment, segs); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("%s: %d segments", path, len(segs))
}

// WriteFuzzSeeds writes two seeds of a fixture to a fuzz target's corpus
// directory (testdata/fuzz/<Target>): the fixture whole as the client, and
// captured 64 bytes at a time as the server.
func WriteFuzzSeeds(tb testing.TB, dir, name string, segs []Segment) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, v := range []struct {
		role    l7.Role
		capture byte
	}{{l7.Client, 0}, {l7.Server, 4}} {
		b := FuzzInput(segs, v.role, v.capture)
		file := filepath.Join(dir, fmt.Sprintf("%s-%v-%d", name, v.role, FuzzCaps[v.capture]))
		if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// LastConnection is the last connection r proxied (clients that check the
// server on a first connection before the one that matters).
func LastConnection(tb testing.TB, r *Recorder) []Segment {
	tb.Helper()
	conns := r.Connections()
	if len(conns) == 0 {
		tb.Fatal("no connection recorded")
	}
	return conns[len(conns)-1]
}

// CPUTime is the process's user and system CPU time in ns: benchmarks
// report it per operation, as on a loaded machine wall time also counts
// the time spent waiting for a CPU.
func CPUTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// CheckConversation checks the exchanges of a conversation built for a
// test (segs, one chunk each, timestamps from ts0 by step) as both roles,
// whole and split into single bytes, ignoring sizes. It returns the last
// parser, for the protocol's own counters.
func CheckConversation(t *testing.T, newParser func(l7.Role) l7.Parser, segs []Segment, ts0, step uint64, want []l7.Exchange) l7.Parser {
	t.Helper()
	var last l7.Parser
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		for _, n := range []int{0, 1} {
			chunks := Chunks(segs, role, ts0, step)
			if n > 0 {
				chunks = Resplit(chunks, n)
			}
			p := newParser(role)
			got := Run(p, chunks)
			for i := range got {
				got[i].ReqBytes, got[i].RespBytes = 0, 0
			}
			if d := Diff(got, want, true); d != "" {
				t.Errorf("%v, split %d:\n%s", role, n, d)
			}
			last = p
		}
	}
	return last
}

// FeedRound feeds round (a request and its response, repeated in a
// steady state) to p and returns the exchanges, in out's storage.
func FeedRound(p l7.Parser, round []l7.Chunk, out []l7.Exchange) []l7.Exchange {
	out = out[:0]
	for _, c := range round {
		out = p.Feed(c, out)
	}
	return out
}

// CheckRound checks that a warm parser gives n exchanges (with an API and
// a response) for each round, and allocates nothing doing it.
func CheckRound(t *testing.T, p l7.Parser, round []l7.Chunk, n int) {
	t.Helper()
	out := make([]l7.Exchange, 0, 16)
	if got := FeedRound(p, round, out); len(got) != n || got[0].API == "" || !got[0].HasResponse {
		t.Fatalf("a round gives %+v, want %d exchanges", got, n)
	}
	if a := testing.AllocsPerRun(200, func() { FeedRound(p, round, out) }); a != 0 {
		t.Errorf("%.1f allocations per round", a)
	}
}

// BenchRound benchmarks a warm parser on round, which gives n exchanges,
// and reports the wall and CPU (CPUTime) time per exchange.
func BenchRound(b *testing.B, p l7.Parser, round []l7.Chunk, n int) {
	out := make([]l7.Exchange, 0, 16)
	size := 0
	for _, c := range round {
		size += len(c.Data)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := CPUTime()
	for range b.N {
		out = FeedRound(p, round, out)
	}
	cpu := CPUTime() - cpu0
	b.StopTimer()
	if len(out) != n {
		b.Fatalf("%d exchanges a round, want %d", len(out), n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/exchange")
	b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/exchange")
}
