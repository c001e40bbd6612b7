package dubbo

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/fuzzchunks"
)

// FuzzParser feeds arbitrary bytes, chunked, truncated and directed as the
// fuzzer likes, to a client-side and a server-side parser; the seeds are
// the conversation of TestConversation.
func FuzzParser(f *testing.F) {
	var data, ctrl []byte
	for _, c := range chunks(l7.Client) {
		for b := c.Data; len(b) > 0 && len(data) < 8<<10; {
			n := min(len(b), 256)
			var dir byte
			if c.Dir == l7.Ingress {
				dir = 1
			}
			ctrl = append(ctrl, dir, byte(n-1), 0)
			data = append(data, b[:n]...)
			b = b[n:]
		}
	}
	f.Add(data, ctrl)
	f.Fuzz(func(t *testing.T, data, ctrl []byte) {
		chunks := fuzzchunks.Chunks(data, ctrl)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := NewParser(role)
			if msg := fuzzchunks.Check(p, chunks, role, HeaderLen); msg != "" {
				t.Fatalf("%s: %s", role, msg)
			}
			if len(p.q) > maxPending {
				t.Fatalf("%d pending", len(p.q))
			}
		}
		Detect(data)
		if s, rest, ok := readString(data); ok && len(s)+len(rest) > len(data) {
			t.Fatal("readString grew its input")
		}
	})
}
