// Package l7test holds what the protocol parsers' tests share: recorded
// conversations (fixture files), a recorder that captures them from real
// clients and servers through a loopback proxy, and the ways a parser is
// fed in tests (whole segments, re-split at other boundaries, truncated).
//
// Fixture format (testdata/*.chunks): one segment per line, in the order
// the bytes crossed the connection:
//
//	C <hex>   bytes the client sent (as one read of the proxy saw them)
//	S <hex>   bytes the server sent
//	# ...     a comment (what was recorded, with which client and server)
//
// Blank lines are ignored.
package l7test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// Segment is a run of bytes one side sent.
type Segment struct {
	FromClient bool
	Data       []byte
}

// Parse reads a fixture.
func Parse(r io.Reader) ([]Segment, error) {
	var out []Segment
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		side, data, ok := strings.Cut(line, " ")
		if !ok || (side != "C" && side != "S") {
			return nil, fmt.Errorf("line %d: want \"C <hex>\" or \"S <hex>\"", n)
		}
		b, err := hex.DecodeString(strings.TrimSpace(data))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, Segment{FromClient: side == "C", Data: b})
	}
	return out, sc.Err()
}

// Load reads the fixture at path or fails the test.
func Load(tb testing.TB, path string) []Segment {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	segs, err := Parse(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return segs
}

// Write writes segments in the fixture format, after a comment line.
func Write(w io.Writer, comment string, segs []Segment) error {
	bw := bufio.NewWriter(w)
	for _, l := range strings.Split(comment, "\n") {
		fmt.Fprintf(bw, "# %s\n", l)
	}
	for _, s := range segs {
		side := "S"
		if s.FromClient {
			side = "C"
		}
		fmt.Fprintf(bw, "%s %s\n", side, hex.EncodeToString(s.Data))
	}
	return bw.Flush()
}

// Chunks turns segments into what a parser on role's side is fed: the
// client's segments are Egress for a client and Ingress for a server.
// Timestamps start at ts0 and advance by step per chunk.
func Chunks(segs []Segment, role l7.Role, ts0, step uint64) []l7.Chunk {
	out := make([]l7.Chunk, 0, len(segs))
	ts := ts0
	for _, s := range segs {
		dir := l7.Ingress
		if s.FromClient == (role != l7.Server) {
			dir = l7.Egress
		}
		out = append(out, l7.Chunk{Dir: dir, TS: ts, Data: s.Data, Size: len(s.Data)})
		ts += step
	}
	return out
}

// Resplit joins consecutive chunks of one direction and cuts them again
// every n bytes, as reads of another size would have seen them. Each new
// chunk takes the timestamp of the chunk its first byte came from.
func Resplit(chunks []l7.Chunk, n int) []l7.Chunk {
	if n <= 0 {
		n = 1
	}
	var out []l7.Chunk
	for i := 0; i < len(chunks); {
		j := i
		var buf []byte
		var starts []uint64 // ts per byte offset boundary
		for ; j < len(chunks) && chunks[j].Dir == chunks[i].Dir; j++ {
			for range chunks[j].Data {
				starts = append(starts, chunks[j].TS)
			}
			buf = append(buf, chunks[j].Data...)
		}
		for off := 0; off < len(buf); off += n {
			end := min(off+n, len(buf))
			out = append(out, l7.Chunk{Dir: chunks[i].Dir, TS: starts[off], Data: buf[off:end], Size: end - off})
		}
		i = j
	}
	return out
}

// Truncate caps every chunk's captured data at max bytes, keeping its
// Size: what a capture with a max-byte buffer delivers.
func Truncate(chunks []l7.Chunk, max int) []l7.Chunk {
	out := make([]l7.Chunk, len(chunks))
	for i, c := range chunks {
		if len(c.Data) > max {
			c.Data = c.Data[:max]
		}
		out[i] = c
	}
	return out
}

// Run feeds chunks to p, then flushes it, and returns every exchange.
func Run(p l7.Parser, chunks []l7.Chunk) []l7.Exchange {
	var out []l7.Exchange
	for _, c := range chunks {
		out = p.Feed(c, out)
	}
	return p.Flush(out)
}

// RunPaths is Run for a parser that keeps paths: each exchange's path is
// copied as it comes out (a Path is only valid until the next Feed), into
// paths ("" for none), and the exchanges are returned with Path nil, as a
// parser that keeps none returns them.
func RunPaths(p l7.Parser, chunks []l7.Chunk) (out []l7.Exchange, paths []string) {
	take := func(from int) {
		for i := from; i < len(out); i++ {
			s := ""
			if out[i].Path != nil {
				s = out[i].Path.String()
			}
			paths = append(paths, s)
			out[i].Path = nil
		}
	}
	for _, c := range chunks {
		n := len(out)
		out = p.Feed(c, out)
		take(n)
	}
	n := len(out)
	out = p.Flush(out)
	take(n)
	return out, paths
}

// CheckPaths checks what RunPaths returned against the exchanges of the
// same chunks parsed without paths: keeping paths changes no exchange,
// and every path is one a span may carry (at most l7.MaxPath bytes of
// visible ASCII, no query or fragment, only with a request).
func CheckPaths(t testing.TB, plain, withPaths []l7.Exchange, paths []string) {
	t.Helper()
	if len(plain) != len(withPaths) {
		t.Fatalf("%d exchanges with paths kept, %d without", len(withPaths), len(plain))
	}
	for i := range plain {
		if plain[i] != withPaths[i] {
			t.Fatalf("exchange %d: %+v with paths kept, %+v without", i, withPaths[i], plain[i])
		}
		p := paths[i]
		if p == "" {
			continue
		}
		if !plain[i].HasRequest || len(p) > l7.MaxPath || strings.ContainsAny(p, "?#") {
			t.Fatalf("exchange %d: path %q: %+v", i, p, plain[i])
		}
		for _, c := range []byte(p) {
			if c <= ' ' || c >= 0x7f {
				t.Fatalf("exchange %d: path %q has byte %#x", i, p, c)
			}
		}
	}
}

// Recorder is a loopback TCP proxy in front of a real server that records
// every read of each side as a segment.
type Recorder struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	segs  []Segment
	conns [][]Segment // segs split by proxied connection, in accept order
	wg    sync.WaitGroup
}

// Record starts a proxy to upstream (host:port) on 127.0.0.1:0; point the
// client at Addr.
func Record(tb testing.TB, upstream string) *Recorder {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Recorder{ln: ln, upstream: upstream}
	go r.accept()
	tb.Cleanup(func() { r.ln.Close() })
	return r
}

// Addr is the proxy's address.
func (r *Recorder) Addr() string { return r.ln.Addr().String() }

func (r *Recorder) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", r.upstream)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		conn := len(r.conns)
		r.conns = append(r.conns, nil)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(c, u, true, conn)
		go r.pipe(u, c, false, conn)
	}
}

func (r *Recorder) pipe(from, to net.Conn, fromClient bool, conn int) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			r.mu.Lock()
			seg := Segment{FromClient: fromClient, Data: bytes.Clone(buf[:n])}
			r.segs = append(r.segs, seg)
			r.conns[conn] = append(r.conns[conn], seg)
			r.mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if tc, ok := to.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		to.Close()
	}
}

// Segments stops accepting, waits for open connections to end, and returns
// what was recorded. Close the client's connections first.
func (r *Recorder) Segments() []Segment {
	r.ln.Close()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.segs
}

// Connections is Segments split by connection, in the order the proxy
// accepted them: clients that open several connections (redis-benchmark's
// configuration fetch, a Kafka client's producer, fetcher and group
// connections, a MongoDB driver's monitor and pool) interleave them in
// Segments, and a parser needs one connection's bytes. Close the client's
// connections first.
func (r *Recorder) Connections() [][]Segment {
	r.ln.Close()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}
