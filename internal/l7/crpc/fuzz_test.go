package crpc

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/fuzzchunks"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// FuzzParser feeds arbitrary bytes, chunked, truncated and directed as the
// fuzzer likes, to a client-side and a server-side parser. The seed corpus
// (testdata/fuzz/FuzzParser) is the fixture: GALAGO_FUZZ_SEED=1 go test
// -run TestWriteFuzzCorpus rewrites it.
func FuzzParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, data, ctrl []byte) {
		chunks := fuzzchunks.Chunks(data, ctrl)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := NewParser(role)
			if msg := fuzzchunks.Check(p, chunks, role, MinHeader); msg != "" {
				t.Fatalf("%s: %s", role, msg)
			}
			if p.q.Len() > maxPending {
				t.Fatalf("%d pending", p.q.Len())
			}
		}
		Detect(data)
	})
}

func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GALAGO_FUZZ_SEED") != "1" {
		t.Skip("set GALAGO_FUZZ_SEED=1 to rewrite testdata/fuzz/FuzzParser from the fixture")
	}
	data, ctrl := fuzzchunks.Seed(l7test.Load(t, fixture), l7.Client, 8<<10)
	if err := fuzzchunks.WriteCorpus("FuzzParser", map[string][2][]byte{"synthetic": {data, ctrl}}); err != nil {
		t.Fatal(err)
	}
}
