package taskstats

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
)

// BenchmarkTGID is the cost of one process's delays: one generic netlink
// round trip (what the baseinfo delay sub-item pays per process and
// period).
func BenchmarkTGID(b *testing.B) {
	probetest.RequirePrivileged(b)
	c, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pid := os.Getpid()
	for b.Loop() {
		if _, err := c.TGID(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPrivilegedSelf: the kernel answers for this process, with the CPU
// delay of this kernel's struct taskstats, and a pid that does not exist
// is "not exist".
func TestPrivilegedSelf(t *testing.T) {
	probetest.RequirePrivileged(t)
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.TGID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.TGID != uint32(os.Getpid()) || !s.Has(CPU) || !s.Has(BlockIO) || s.Delays[CPU].Count == 0 {
		t.Errorf("%+v", s)
	}
	if _, err := c.TGID(1 << 22); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid 4194304: %v, want not exist", err)
	}
}
