package sqlapi

import "testing"

func BenchmarkAppend(b *testing.B) {
	for _, q := range []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
		"UPDATE pgbench_accounts SET abalance = abalance + -4321 WHERE aid = 77;",
		"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 2, 3, 4, CURRENT_TIMESTAMP);",
		"BEGIN;",
	} {
		sql := []byte(q)
		buf := make([]byte, 0, MaxTemplate)
		b.Run(q[:6], func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				buf = Append(buf[:0], sql, Postgres)
			}
		})
	}
}
