package bpfrt

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cilium/ebpf/link"
)

// fakeLink records its Close; the embedded nil Link makes it a link.Link.
type fakeLink struct {
	link.Link
	name   string
	closed *[]string
	err    error
}

func (l *fakeLink) Close() error {
	*l.closed = append(*l.closed, l.name)
	return l.err
}

func TestLinks(t *testing.T) {
	var closed []string
	mk := func(name string, err error) *fakeLink { return &fakeLink{name: name, closed: &closed, err: err} }

	if err := CloseLinks([]link.Link{mk("a", nil), mk("b", errors.New("busy")), mk("c", nil)}); err == nil || err.Error() != "busy" {
		t.Fatalf("CloseLinks: %v", err)
	}
	if want := []string{"c", "b", "a"}; !reflect.DeepEqual(closed, want) {
		t.Fatalf("closed %v, want reverse order %v", closed, want)
	}

	closed = nil
	ls := Links{}
	attaches := 0
	attach := func(l link.Link, err error) func() (link.Link, error) {
		return func() (link.Link, error) { attaches++; return l, err }
	}
	if _, err := ls.Set("p", true, attach(nil, errors.New("no hook"))); err == nil || err.Error() != "attach p: no hook" || len(ls) != 0 {
		t.Fatalf("failed attach: %v, %d links", err, len(ls))
	}
	if d, err := ls.Set("p", true, attach(mk("p", nil), nil)); d || err != nil || len(ls) != 1 {
		t.Fatalf("attach: %v %v, %d links", d, err, len(ls))
	}
	if _, err := ls.Set("p", true, attach(nil, errors.New("attached twice"))); err != nil || attaches != 2 {
		t.Fatalf("wanted and attached: %v, %d attaches", err, attaches)
	}
	ls["q"] = mk("q", errors.New("busy"))
	if d, err := ls.Set("q", false, nil); d || err == nil || err.Error() != "detach q: busy" || ls["q"] == nil {
		t.Fatalf("failed detach: %v %v, kept %v", d, err, ls["q"] != nil)
	}
	if d, err := ls.Set("p", false, nil); !d || err != nil || ls["p"] != nil {
		t.Fatalf("detach: %v %v", d, err)
	}
	if d, err := ls.Set("p", false, nil); d || err != nil {
		t.Fatalf("not wanted, not attached: %v %v", d, err)
	}
	closed = nil
	if err := ls.Close(); err == nil || len(ls) != 0 || !reflect.DeepEqual(closed, []string{"q"}) {
		t.Fatalf("Close: %v, %d left, closed %v", err, len(ls), closed)
	}
}
