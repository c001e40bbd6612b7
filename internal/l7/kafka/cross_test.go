package kafka

import (
	"path/filepath"
	"testing"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestDetectOthersFixtures: the first bytes of the other protocols'
// recorded client connections are not taken for this protocol.
func TestDetectOthersFixtures(t *testing.T) {
	files, _ := filepath.Glob("../*/testdata/*.chunks")
	n := 0
	for _, f := range files {
		if filepath.Base(filepath.Dir(filepath.Dir(f))) == "kafka" {
			continue
		}
		segs := l7test.Load(t, f)
		if len(segs) > 0 && segs[0].FromClient {
			n++
			if Detect(segs[0].Data) {
				t.Errorf("%s detected", f)
			}
		}
	}
	if n == 0 {
		t.Fatal("no other fixtures")
	}
}
