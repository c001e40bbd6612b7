package flamegraph

import (
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
		"?type=mem":             http.StatusBadRequest,
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
	h.publish(onCPU, app, "main;burn_a", 30)
	h.publish(onCPU, app, "main;burn_a", 6)
	h.publish(onCPU, other, "main;burn_b", 12)
	h.publish(offCPU, app, "main;sleepy", 1000) // another type
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
