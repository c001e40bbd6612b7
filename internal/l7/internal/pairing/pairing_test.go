package pairing

import (
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

func TestQueue(t *testing.T) {
	q := Queue[int]{Max: 2}
	var out []l7.Exchange
	for i := 1; i <= 3; i++ {
		out = q.Push(Req[int]{ID: i, TS: uint64(i), API: "a"}, out)
	}
	if len(out) != 1 || out[0].Start != 1 || out[0].HasResponse || q.Len() != 2 {
		t.Fatalf("evicted %+v, %d waiting", out, q.Len())
	}
	r, ok := q.Take(3)
	if !ok || r.TS != 3 {
		t.Fatalf("take 3: %+v %v", r, ok)
	}
	if _, ok := q.Take(1); ok {
		t.Error("an evicted request taken")
	}
	if e := r.Answered(9, 5, l7.ServerError); e.End != 9 || e.Start != 3 || e.RespBytes != 5 || e.Class != l7.ServerError {
		t.Errorf("answered %+v", e)
	}
	if out := q.Flush(nil); len(out) != 1 || out[0].Start != 2 || q.Len() != 0 {
		t.Errorf("flush %+v", out)
	}
}
