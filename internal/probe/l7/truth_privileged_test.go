package l7

import (
	"testing"

	"github.com/galago-project/galago/internal/syscap"
)

// TestGroundTruthPrivileged runs the ground-truth tests of the protocols
// below on one probe (every protocol they speak): the capture's load
// dominates a short test, so they share it; each subtest has servers of
// its own, and its rows are told apart by their server port. The capture
// is a shared one, as in the daemon, so that the sermant feature's test
// adds a consumer rather than a capture.
func TestGroundTruthPrivileged(t *testing.T) {
	shared := syscap.NewShared(syscap.Options{})
	e := newEnvOf(t, New(WithShared(shared)), []string{"http", "mysql", "kafka", "dns"}, false,
		"mariadb-install-db", "mariadbd", "unbound", "unbound-control", "ip")
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"h2c", func(t *testing.T, e *env) { testGoHTTP2(t, e, false) }},
		{"grpc", testGRPC},
		{"mariadb", testMariaDB},
		{"kafka", testKafka},
		{"dns", testDNS},
		{"sermant", func(t *testing.T, e *env) { testSermant(t, e, shared) }},
	} {
		lost := e.rt.LostCount()
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			tc.run(t, e)
			// Each subtest's own losses, counted once its rows settled.
			if n := e.rt.LostCount() - lost; n != 0 {
				t.Errorf("%d events lost (galago_probe_events_lost_total{probe=l7}) during this subtest", n)
			}
		})
		e.t = t
	}
	e.checkLost()
}

// TestGoHTTP2TLSPrivileged is testGoHTTP2 over TLS, on a probe of its own
// with the TLS uprobes on.
func TestGoHTTP2TLSPrivileged(t *testing.T) {
	e := newEnv(t, []string{"http"}, true)
	testGoHTTP2(t, e, true)
	e.checkLost()
}
