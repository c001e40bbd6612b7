package l7test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

// CheckFixture feeds a recorded conversation to parsers on both sides,
// whole, re-split and truncated, checks what must hold and returns the
// golden text (whole, then each truncation).
func CheckFixture(t *testing.T, segs []Segment, newParser func(l7.Role) l7.Parser, want string) string {
	t.Helper()
	return checkFixture(t, segs, newParser, want, true)
}

// CheckDatagrams is CheckFixture for a datagram protocol: each segment is
// one datagram, which reads of other sizes do not cut, so nothing is
// re-split.
func CheckDatagrams(t *testing.T, segs []Segment, newParser func(l7.Role) l7.Parser, want string) string {
	t.Helper()
	return checkFixture(t, segs, newParser, want, false)
}

func checkFixture(t *testing.T, segs []Segment, newParser func(l7.Role) l7.Parser, want string, resplit bool) string {
	t.Helper()
	var golden strings.Builder
	var whole []l7.Exchange
	for _, role := range []l7.Role{l7.Client, l7.Server} {
		chunks := Chunks(segs, role, 1000, 1000)
		p := newParser(role)
		got := Run(p, chunks)
		if p.Desyncs() != 0 {
			t.Errorf("%v: %d desyncs on whole chunks", role, p.Desyncs())
		}
		if s := Summary(got); s != want {
			t.Errorf("%v: exchanges\n got %s\nwant %s", role, s, want)
		}
		if whole == nil {
			whole = got
			what := "whole, either role"
			if resplit {
				what += ", re-split at 1, 2, 7, 64 bytes"
			}
			fmt.Fprintf(&golden, "# %s: %d exchanges\n%s", what, len(got), Describe(got))
		} else if !reflect.DeepEqual(got, whole) {
			t.Errorf("server role differs from client role:\n%s", diff(Describe(whole), Describe(got)))
		}
		for _, n := range []int{1, 2, 7, 64} {
			if !resplit {
				break
			}
			p := newParser(role)
			re := Run(p, Resplit(chunks, n))
			if p.Desyncs() != 0 || !sameResplit(re, whole, n) {
				t.Errorf("%v re-split at %d: %d desyncs\n%s", role, n, p.Desyncs(), diff(Describe(whole), Describe(re)))
			}
		}
	}
	for _, max := range []int{4096, 256, 64} {
		var first string
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			p := newParser(role)
			got := Run(p, Truncate(Chunks(segs, role, 1000, 1000), max))
			d := Describe(got)
			s := fmt.Sprintf("\n# truncated to %d: %d exchanges, %d desyncs\n", max, len(got), p.Desyncs())
			if d == Describe(whole) {
				s += "(as whole)\n"
			} else {
				s += d
			}
			if role == l7.Client {
				first = s
				golden.WriteString(s)
			} else if s != first {
				t.Errorf("truncated to %d: server role differs from client role:\n%s", max, diff(first, s))
			}
		}
	}
	return golden.String()
}

// sameResplit compares exchanges of re-split chunks with those of the
// whole ones. Cut at every byte, each byte keeps its chunk's timestamp, so
// all must be equal; cut at n bytes, a chunk that joins the end of one
// segment and the start of the next has the first one's timestamp, so
// timestamps may be earlier, never later.
func sameResplit(re, whole []l7.Exchange, n int) bool {
	if n == 1 || len(re) != len(whole) {
		return reflect.DeepEqual(re, whole)
	}
	for i := range re {
		a, b := re[i], whole[i]
		if a.Start > b.Start || a.End > b.End {
			return false
		}
		a.Start, a.End, b.Start, b.End = 0, 0, 0, 0
		if a != b {
			return false
		}
	}
	return true
}

// Summary is "API class|..." ("-" for no reply).
func Summary(ex []l7.Exchange) string {
	var b strings.Builder
	for i, e := range ex {
		if i > 0 {
			b.WriteByte('|')
		}
		c := e.Class.String()
		if !e.HasResponse {
			c = "-"
		}
		if !e.HasRequest {
			c = "orphan " + c
		}
		fmt.Fprintf(&b, "%s %s", e.API, c)
	}
	return b.String()
}

// Describe writes one line per exchange; timestamps as the index of the
// fixture segment (Chunks was given ts0 1000, step 1000).
func Describe(ex []l7.Exchange) string {
	var b strings.Builder
	for _, e := range ex {
		fmt.Fprintf(&b, "%q %s", e.API, e.Class)
		if e.HasRequest {
			fmt.Fprintf(&b, " req=%d@%d", e.ReqBytes, (e.Start-1000)/1000)
		} else {
			b.WriteString(" no-request")
		}
		if e.HasResponse {
			fmt.Fprintf(&b, " resp=%d@%d", e.RespBytes, (e.End-1000)/1000)
		} else {
			b.WriteString(" no-response")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("first difference at line %d:\n want %s\n  got %s", i+1, a, b)
		}
	}
	return "(no difference)"
}

func CompareGolden(t *testing.T, path, got string) {
	t.Helper()
	if os.Getenv("GALAGO_L7_UPDATE") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (GALAGO_L7_UPDATE=1 writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n%s", path, diff(string(want), got))
	}
}
