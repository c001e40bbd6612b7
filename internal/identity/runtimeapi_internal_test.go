package identity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// listSource is a runtime answering from its fields.
type listSource struct {
	name, sock string
	cs         []Container
	err        error
}

func (s *listSource) kind() string   { return s.name }
func (s *listSource) socket() string { return s.sock }
func (s *listSource) close()         {}
func (s *listSource) list(context.Context) ([]Container, error) {
	return s.cs, s.err
}

// newTestAPI returns a runtimeAPI over sources whose sockets exist (empty
// files under a temporary root), with a clock the test moves.
func newTestAPI(t testing.TB, max int, now *time.Time, srcs ...*listSource) *runtimeAPI {
	t.Helper()
	root := t.TempDir()
	a, err := newRuntimeAPI(root, Runtimes{}, max, time.Second, time.Minute, nil, func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		if err := os.WriteFile(filepath.Join(root, s.sock), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		a.sources = append(a.sources, &sourceState{src: s})
	}
	return a
}

// TestRuntimeRefresh: field-by-field precedence of the sources, a failing
// source keeping its last good listing, a container that left the listings
// kept for the grace period then forgotten, and the bound.
func TestRuntimeRefresh(t *testing.T) {
	const a1 = "a100000000000000000000000000000000000000000000000000000000000000"
	const b2 = "b200000000000000000000000000000000000000000000000000000000000000"
	now := time.Unix(1_700_000_000, 0)
	cri := &listSource{name: "cri", sock: "cri.sock", cs: []Container{
		{ID: a1, Name: "web", PodName: "web-0", PodNamespace: "shop", PodID: "p", PodLabels: map[string]string{"app": "web"}},
	}}
	docker := &listSource{name: "docker", sock: "docker.sock", cs: []Container{
		{ID: a1, Name: "k8s_web_web-0", Image: "nginx:1.25", Labels: map[string]string{"x": "y"}},
		{ID: b2, Name: "db", Image: "postgres:16"},
	}}
	a := newTestAPI(t, 8, &now, cri, docker)
	ctx := context.Background()
	a.refresh(ctx)
	want := Container{ID: a1, Name: "web", Image: "nginx:1.25", PodName: "web-0", PodNamespace: "shop", PodID: "p",
		PodLabels: map[string]string{"app": "web"}, Labels: map[string]string{"x": "y"}}
	if got, ok := a.lookup(a1); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("merged = %+v %v\nwant %+v", got, ok, want)
	}

	// docker fails: its containers stay as last listed.
	docker.err = errors.New("connection reset")
	now = now.Add(10 * time.Second)
	a.refresh(ctx)
	if got, ok := a.lookup(b2); !ok || got.Image != "postgres:16" {
		t.Errorf("after a failed listing: %+v %v", got, ok)
	}
	if s := a.sources[1]; s.up || s.errors != 1 {
		t.Errorf("docker state up=%v errors=%d, want down with 1 error", s.up, s.errors)
	}

	// db exits: kept for the grace period after its last listing.
	docker.err = nil
	docker.cs = docker.cs[:1]
	now = now.Add(10 * time.Second)
	a.refresh(ctx)
	if _, ok := a.lookup(b2); !ok {
		t.Error("exited container forgotten at once")
	}
	now = now.Add(time.Minute)
	a.refresh(ctx)
	if c, ok := a.lookup(b2); ok {
		t.Errorf("exited container still known after the grace period: %+v", c)
	}

	// Abbreviations: a unique 12-digit id (indexed) or other prefix expands,
	// one that two containers share does not.
	const a1twin = "a100000000009999999999999999999999999999999999999999999999999999"
	c := newTestAPI(t, 8, &now, &listSource{name: "cri", sock: "c.sock", cs: []Container{{ID: a1}, {ID: a1twin}, {ID: b2}}})
	c.refresh(ctx)
	for prefix, want := range map[string]string{b2[:12]: b2, b2[:5]: b2, a1[:12]: a1[:12], a1[:14]: a1, a1twin[:13]: a1twin} {
		if got := c.expand(prefix); got != want {
			t.Errorf("expand(%s) = %s, want %s", prefix, got, want)
		}
	}

	// Bound of 1: the second listed container is dropped and counted.
	b := newTestAPI(t, 1, &now, &listSource{name: "docker", sock: "d.sock", cs: []Container{{ID: a1}, {ID: b2}}})
	b.refresh(ctx)
	b.refresh(ctx)
	if _, ok := b.lookup(b2); ok || b.dropped != 2 {
		t.Errorf("bound 1: second kept=%v, dropped %d, want not kept, 2 (one per listing)", ok, b.dropped)
	}
}
