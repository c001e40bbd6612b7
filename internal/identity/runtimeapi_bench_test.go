package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRuntimeContainer is the enrichment path's cost of a container
// lookup with the runtime APIs on, 500 listed containers: by full id (a
// process's container) and by the 12-digit id of container rows.
func BenchmarkRuntimeContainer(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	var cs []Container
	for i := 0; i < 500; i++ {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		cs = append(cs, Container{ID: hex.EncodeToString(sum[:]), Name: fmt.Sprint("c", i), Image: "img:1",
			PodLabels: map[string]string{"app": "x"}})
	}
	r := NewResolver(b.TempDir(), WithStateDirs(), WithCgroup2Mount(b.TempDir()), WithClock(func() time.Time { return now }))
	a := newTestAPI(b, 1024, &now, &listSource{name: "cri", sock: "cri.sock", cs: cs})
	r.rt = a
	a.refresh(context.Background())
	id := cs[250].ID
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if c, ok := r.Container(id); !ok || c.Name != "c250" {
				b.Fatal(c, ok)
			}
		}
	})
	b.Run("short", func(b *testing.B) {
		for b.Loop() {
			if c, ok := r.Container(id[:12]); !ok || c.Name != "c250" {
				b.Fatal(c, ok)
			}
		}
	})
}
