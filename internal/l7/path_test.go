package l7

import (
	"strings"
	"testing"
)

func TestPathSet(t *testing.T) {
	long := "/" + strings.Repeat("a", 300)
	for _, c := range []struct {
		name    string
		in      string
		partial bool
		want    string
		cut     bool
	}{
		{"plain", "/items/17", false, "/items/17", false},
		{"empty", "", false, "", false},
		{"percent-encodes what is not visible ASCII", "/a b/\xc3\xa9\x00\x7f", false, "/a%20b/%C3%A9%00%7F", false},
		{"keeps the client's encoding", "/a%20b", false, "/a%20b", false},
		{"fits exactly", long[:MaxPath], false, long[:MaxPath], false},
		{"one byte over", long[:MaxPath+1], false, long[:MaxPath-3] + "...", true},
		{"partial", "/items/1", true, "/items/1...", true},
		{"never cuts an encoded byte", long[:MaxPath-5] + "\xff\xff", false, long[:MaxPath-5] + "...", true},
		{"never cuts an encoded byte (2)", long[:MaxPath-4] + "\xff\xff", false, long[:MaxPath-4] + "...", true},
	} {
		var p Path
		p.Set([]byte("/previous/value/that/is/longer"), true)
		p.Set([]byte(c.in), c.partial)
		if got := p.String(); got != c.want || p.Cut() != c.cut || string(p.Bytes()) != got {
			t.Errorf("%s: %q cut=%v, want %q cut=%v", c.name, got, p.Cut(), c.want, c.cut)
		}
		if len(p.String()) > MaxPath {
			t.Errorf("%s: %d bytes", c.name, len(p.String()))
		}
	}
}

func TestPathPool(t *testing.T) {
	var off PathPool
	if off.Get() != nil || off.Emit(nil) != nil {
		t.Fatal("a disabled pool lends paths")
	}
	var pp PathPool
	pp.Enable()
	a, b := pp.Get(), pp.Get()
	if a == nil || b == nil || a == b {
		t.Fatalf("Get: %p %p", a, b)
	}
	a.Set([]byte("/a"), false)
	if pp.Emit(a) != a {
		t.Fatal("Emit does not return its path")
	}
	// a was handed out: not lent again before Recycle.
	if c := pp.Get(); c == a {
		t.Fatal("an emitted path lent again before Recycle")
	}
	pp.Recycle()
	if c := pp.Get(); c != a {
		t.Fatal("a recycled path not reused")
	}
	// Steady state: one request per Feed costs no allocation.
	allocs := testing.AllocsPerRun(100, func() {
		pp.Recycle()
		p := pp.Get()
		p.Set([]byte("/items/17"), false)
		pp.Emit(p)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
	// The free list is bounded.
	for range 3 * pathPoolFree {
		pp.Emit(pp.Get())
	}
	pp.Recycle()
	if len(pp.free) > pathPoolFree {
		t.Errorf("%d free paths kept, bound %d", len(pp.free), pathPoolFree)
	}
}
