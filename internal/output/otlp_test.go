package output

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestOTLPRefusesUnknownProtocol(t *testing.T) {
	_, err := StartOTLP(context.Background(), OTLPOptions{Gatherer: prometheus.NewRegistry(), Protocol: "http/json"})
	if err == nil || !strings.Contains(err.Error(), `"http/json"`) {
		t.Fatalf("StartOTLP(http/json) = %v, want an error naming the protocol", err)
	}
}

// TestOTLPCountsExportsAndFailures pushes to an HTTP endpoint that takes
// the first export and refuses the next with a non-retryable status:
// both are counted, the failure as such.
func TestOTLPCountsExportsAndFailures(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/metrics" {
			t.Errorf("export to %s, want /v1/metrics", r.URL.Path)
		}
		if calls.Add(1) > 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "gala_gopher_test_total", Help: "h"})
	c.Add(3)
	reg.MustRegister(c)
	o, err := StartOTLP(context.Background(), OTLPOptions{Gatherer: reg, Protocol: OTLPProtocolHTTP, Endpoint: srv.URL, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for o.failures.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.Close(ctx)
	if o.exports.Load() < 2 || o.failures.Load() == 0 || o.failures.Load() >= o.exports.Load() {
		t.Errorf("exports %d, failures %d: want the first delivered and a later one failed", o.exports.Load(), o.failures.Load())
	}
}
