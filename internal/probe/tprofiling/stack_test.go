package tprofiling

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/galago-project/galago/internal/syscap"
)

func stackLeaf() {}
func stackRoot() {}

// TestStackNames names a stack of this test binary's own functions (as the
// kernel gives it: leaf first, return addresses, which name the
// instruction before), reads each id once, and tells an id it cannot read.
func TestStackNames(t *testing.T) {
	leaf, root := uint64(reflect.ValueOf(stackLeaf).Pointer()), uint64(reflect.ValueOf(stackRoot).Pointer())
	reads := 0
	s := newStackNames("/proc", func(id int32, pcs *[syscap.TprofStackDepth]uint64) ([]uint64, error) {
		reads++
		if id != 3 {
			return nil, errors.New("no such stack")
		}
		pcs[0], pcs[1] = leaf+1, root+1
		return pcs[:2], nil
	})
	s.newReport()
	const want = "github.com/galago-project/galago/internal/probe/tprofiling.stackRoot;" +
		"github.com/galago-project/galago/internal/probe/tprofiling.stackLeaf;"
	for range 2 {
		e := Event{TGID: uint32(os.Getpid()), StackID: 3}
		if !s.name(&e) || e.Stack != want {
			t.Fatalf("func.stack %q, want %q", e.Stack, want)
		}
	}
	if reads != 1 {
		t.Errorf("stack read %d times, want once", reads)
	}
	if e := (Event{TGID: 1, StackID: -1}); !s.name(&e) || e.Stack != "" {
		t.Errorf("no stack: %q", e.Stack)
	}
	if e := (Event{TGID: 1, StackID: 4}); s.name(&e) || e.Stack != "" {
		t.Errorf("unreadable stack: %q", e.Stack)
	}
	// A pruned id is read again: the kernel may give it to another stack.
	s.forget([]int32{3})
	if e := (Event{TGID: uint32(os.Getpid()), StackID: 3}); !s.name(&e) || e.Stack != want || reads != 3 {
		t.Errorf("after forget: %q, %d reads (want 3)", e.Stack, reads)
	}
}
