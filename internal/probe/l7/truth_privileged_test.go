package l7

import "testing"

// TestGroundTruthPrivileged runs the ground-truth tests of the protocols
// below on one probe (every protocol they speak, TLS on): the capture's
// load dominates a short test, so they share it; each subtest has servers
// of its own, and its rows are told apart by their server port.
func TestGroundTruthPrivileged(t *testing.T) {
	e := newEnv(t, []string{"http", "mysql", "kafka", "dns"}, true,
		"mariadb-install-db", "mariadbd", "unbound", "unbound-control", "ip")
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"h2c", func(t *testing.T, e *env) { testGoHTTP2(t, e, false) }},
		{"h2-tls", func(t *testing.T, e *env) { testGoHTTP2(t, e, true) }},
		{"grpc", testGRPC},
		{"mariadb", testMariaDB},
		{"kafka", testKafka},
		{"dns", testDNS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			defer func() { e.t = t }()
			tc.run(t, e)
		})
	}
	e.t = t
	e.checkLost()
}
