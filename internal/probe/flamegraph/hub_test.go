package flamegraph

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/galago-project/galago/internal/probe/probetest"
)

func TestHub(t *testing.T) {
	h := NewHub()
	srv := httptest.NewServer(h)
	defer srv.Close()
	for q, want := range map[string]int{
		"?type=oncpu&seconds=1": http.StatusServiceUnavailable, // no probe yet
		"?type=io":              http.StatusBadRequest,
		"?type=mem_glibc":       http.StatusServiceUnavailable,
		"?seconds=0":            http.StatusBadRequest,
		"?seconds=61":           http.StatusBadRequest,
	} {
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", q, resp.StatusCode, want)
		}
	}

	h.setActive([nKinds]bool{true, false}, 10*time.Millisecond)
	type result struct {
		prof *profile.Profile
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(srv.URL + "?type=oncpu&seconds=1")
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer resp.Body.Close()
		p, err := profile.Parse(resp.Body)
		done <- result{p, err}
	}()
	probetest.WaitFor(t, "subscribed", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.subs) == 1
	})
	app, other := &procProfile{pid: 7, comm: "app"}, &procProfile{pid: 8, comm: "other", con: "web"}
	h.publish(onCPU, app, "main;burn_a", 30, 0)
	h.publish(onCPU, app, "main;burn_a", 6, 0)
	h.publish(onCPU, other, "main;burn_b", 12, 0)
	h.publish(offCPU, app, "main;sleepy", 1000, 0) // another type
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	byPid := map[int64]int64{}
	for _, s := range r.prof.Sample {
		byPid[s.NumLabel["pid"][0]] += s.Value[0]
		if con := s.Label["container"]; s.NumLabel["pid"][0] == 8 && (len(con) != 1 || con[0] != "web") {
			t.Errorf("container label %v", con)
		}
		if s.Value[1] != s.Value[0]*int64(10*time.Millisecond) {
			t.Errorf("cpu ns %d for %d samples", s.Value[1], s.Value[0])
		}
	}
	if len(r.prof.Sample) != 2 || byPid[7] != 36 || byPid[8] != 12 {
		t.Errorf("samples by pid %v (%d samples)", byPid, len(r.prof.Sample))
	}
	h.mu.Lock()
	left := len(h.subs)
	h.mu.Unlock()
	if left != 0 {
		t.Errorf("%d subscriptions left", left)
	}
}

// TestHubLive: a mem_glibc profile carries the bytes allocated during the
// request and the live blocks of the last drain, also of a process that
// allocated nothing meanwhile.
func TestHubLive(t *testing.T) {
	h := NewHub()
	srv := httptest.NewServer(h)
	defer srv.Close()
	h.setActive([nKinds]bool{memGlibc: true}, 10*time.Millisecond)
	done := make(chan *profile.Profile, 1)
	go func() {
		resp, err := http.Get(srv.URL + "?type=mem_glibc&seconds=1")
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		defer resp.Body.Close()
		p, err := profile.Parse(resp.Body)
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	probetest.WaitFor(t, "subscribed", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.subs) == 1
	})
	app := &procProfile{pid: 7, comm: "app"}
	h.publish(memGlibc, app, "main;alloc", 4000, 2)
	h.publish(memGlibc, app, "main;alloc", 1000, 1)
	h.setLive(map[int]*procProfile{
		7: {pid: 7, comm: "app", live: map[string]live{"main;alloc": {2000, 1}}},
		9: {pid: 9, comm: "idle", live: map[string]live{"main;old": {300, 3}}},
	})
	p := <-done
	if p == nil {
		return
	}
	got := map[int64][]int64{}
	for _, s := range p.Sample {
		got[s.NumLabel["pid"][0]] = s.Value
	}
	if len(p.Sample) != 2 || fmt.Sprint(got[7]) != "[3 5000 1 2000]" || fmt.Sprint(got[9]) != "[0 0 3 300]" {
		t.Errorf("samples by pid %v", got)
	}
}
