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
	data, ctrl := fuzzchunks.SeedChunks(chunks(l7.Client), 8<<10)
	f.Add(data, ctrl)
	f.Fuzz(func(t *testing.T, data, ctrl []byte) {
		chunks := fuzzchunks.Chunks(data, ctrl)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := NewParser(role)
			if msg := fuzzchunks.Check(p, chunks, role, HeaderLen); msg != "" {
				t.Fatalf("%s: %s", role, msg)
			}
			if p.q.Len() > maxPending {
				t.Fatalf("%d pending", p.q.Len())
			}
		}
		Detect(data)
		if s, rest, ok := readString(data); ok && len(s)+len(rest) > len(data) {
			t.Fatal("readString grew its input")
		}
	})
}
