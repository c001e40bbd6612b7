package kafka

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/internal/fuzzchunks"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// FuzzParser feeds arbitrary bytes, chunked, truncated and directed as the
// fuzzer likes, to a client-side and a server-side parser. The seed corpus
// (testdata/fuzz/FuzzParser) is the fixtures: GALAGO_FUZZ_SEED=1 go test
// -run TestWriteFuzzCorpus rewrites it.
func FuzzParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, data, ctrl []byte) {
		chunks := fuzzchunks.Chunks(data, ctrl)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := NewParser(role)
			var n int
			p.OnTopic = func(r TopicRecords) {
				if r.Records < 0 && r.Exact {
					t.Errorf("negative exact record count %+v", r)
				}
				n++
			}
			// the smallest message is a response of 8 bytes
			if msg := fuzzchunks.Check(p, chunks, role, 8); msg != "" {
				t.Fatalf("%s: %s", role, msg)
			}
			if len(p.q) > maxPending {
				t.Fatalf("%d pending", len(p.q))
			}
		}
		AppendAPI(nil, data)
		ResponseClass(int16(len(ctrl)%len(apis)), int16(len(data)%14), data)
		Detect(data)
	})
}

func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GALAGO_FUZZ_SEED") != "1" {
		t.Skip("set GALAGO_FUZZ_SEED=1 to rewrite testdata/fuzz/FuzzParser from the fixtures")
	}
	seeds := map[string][2][]byte{}
	for _, f := range fixtures(t) {
		data, ctrl := fuzzchunks.Seed(l7test.Load(t, f), l7.Client, 8<<10)
		seeds[strings.TrimSuffix(filepath.Base(f), ".chunks")] = [2][]byte{data, ctrl}
	}
	if err := fuzzchunks.WriteCorpus("FuzzParser", seeds); err != nil {
		t.Fatal(err)
	}
}
