package l7test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// FuzzChunks cuts a fuzz target's data into chunks: each byte of cuts
// gives a chunk's length (low 6 bits + 1), its direction (bit 6: Ingress)
// and whether only a prefix was captured (bit 7: half of it). It also
// returns how many bytes went in role's request direction. Timestamps are
// 1, 2, 3...
func FuzzChunks(data, cuts []byte, role l7.Role) ([]l7.Chunk, int) {
	var out []l7.Chunk
	reqBytes := 0
	for i := 0; len(data) > 0; i++ {
		c := byte(0x3f)
		if len(cuts) > 0 {
			c = cuts[i%len(cuts)]
		}
		n := min(int(c&0x3f)+1, len(data))
		dir := l7.Egress
		if c&0x40 != 0 {
			dir = l7.Ingress
		}
		if dir == role.RequestDir() {
			reqBytes += n
		}
		capt := n
		if c&0x80 != 0 {
			capt = n / 2
		}
		out = append(out, l7.Chunk{Dir: dir, TS: uint64(i + 1), Data: data[:capt], Size: n})
		data = data[n:]
	}
	return out, reqBytes
}

// CheckFuzzCorpus checks that dir (testdata/fuzz/<target>) holds one seed
// per fixture matching pattern of at most 16 KiB, for a target taking
// (data, cuts []byte, server bool): the fixture's bytes in order and the
// cuts that give its segments back (see FuzzChunks). With
// GALAGO_L7_UPDATE=1 it writes them.
func CheckFuzzCorpus(t *testing.T, pattern, dir string) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	for _, file := range files {
		if st, err := os.Stat(file); err != nil || st.Size() > 16<<10 {
			continue
		}
		var data, cuts []byte
		for _, s := range Load(t, file) {
			for b := s.Data; len(b) > 0; {
				n := min(len(b), 64)
				c := byte(n - 1)
				if !s.FromClient {
					c |= 0x40
				}
				data = append(data, b[:n]...)
				cuts = append(cuts, c)
				b = b[n:]
			}
		}
		seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\nbool(false)\n", data, cuts)
		path := filepath.Join(dir, strings.TrimSuffix(filepath.Base(file), ".chunks"))
		if os.Getenv("GALAGO_L7_UPDATE") == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(seed), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != seed {
			t.Errorf("%s: missing or stale (GALAGO_L7_UPDATE=1 rewrites it)", path)
		}
	}
}
