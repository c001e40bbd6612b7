package sqlapi

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/galago-project/galago/internal/l7"
)

func TestAppendPostgres(t *testing.T) {
	cases := []struct{ sql, want string }{
		// pgbench's tpcb-like script
		{"BEGIN;", "BEGIN"},
		{"UPDATE pgbench_accounts SET abalance = abalance + -4321 WHERE aid = 77;", "UPDATE pgbench_accounts"},
		{"SELECT abalance FROM pgbench_accounts WHERE aid = 77;", "SELECT pgbench_accounts"},
		{"UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;", "UPDATE pgbench_tellers"},
		{"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);", "INSERT pgbench_history"},
		{"END;", "END"},
		{"COMMIT", "COMMIT"},
		{"rollback", "ROLLBACK"},
		{"start transaction isolation level serializable", "START TRANSACTION"},
		// case, comments, quoting, qualified names
		{"  -- leading comment\n/* block /* nested */ still */ select * from \"Public\".\"Orders\" o", "SELECT Public.Orders"},
		{"select 1 -- from t\n from x", "SELECT x"},
		{"SELECT 'a FROM b', \"col\" FROM public.t", "SELECT public.t"},
		{"SELECT E'it\\'s FROM x' FROM y", "SELECT y"},
		{"SELECT 'it''s FROM x' FROM y", "SELECT y"},
		{"SELECT $q$ FROM x $q$, $$ from z $$ FROM y", "SELECT y"},
		{"SELECT $1::int FROM y", "SELECT y"},
		{`SELECT a FROM "we""ird"`, `SELECT we"ird`},
		// no table
		{"SELECT 1", "SELECT"},
		{"select now(), version()", "SELECT"},
		{"SELECT pg_sleep(0.1);", "SELECT"},
		// FROM at the statement's level, subqueries
		{"SELECT (SELECT max(x) FROM t2) AS m FROM t1 WHERE a IN (SELECT b FROM t3)", "SELECT t1"},
		{"SELECT count(*) FROM (SELECT x FROM inner_t WHERE y > 1) s", "SELECT inner_t"},
		{"SELECT * FROM ((SELECT 1 FROM deep) x)", "SELECT deep"},
		{"SELECT * FROM (VALUES (1), (2)) v(a)", "SELECT"},
		{"SELECT * FROM ONLY parent_t", "SELECT parent_t"},
		{"(SELECT a FROM u1) UNION (SELECT a FROM u2)", "SELECT u1"},
		{"SELECT * FROM generate_series(1, 10)", "SELECT generate_series"},
		// CTEs
		{"WITH a AS (SELECT id FROM src) SELECT * FROM a JOIN b USING (id)", "SELECT a"},
		{"WITH RECURSIVE t(n) AS (VALUES (1) UNION ALL SELECT n+1 FROM t WHERE n < 100) SELECT sum(n) FROM t", "SELECT t"},
		{"with moved as materialized (delete from q where id = 1 returning *) insert into done select * from moved", "INSERT done"},
		{"WITH x AS (SELECT 1) UPDATE accounts SET a = 1", "UPDATE accounts"},
		{"WITH x AS (SELECT 1)", "WITH"},
		// DML variants
		{"DELETE FROM ONLY sessions WHERE id = 'secret-token'", "DELETE sessions"},
		{"MERGE INTO tgt USING src ON tgt.id = src.id WHEN MATCHED THEN DO NOTHING", "MERGE tgt"},
		{"TRUNCATE TABLE pgbench_history", "TRUNCATE pgbench_history"},
		{"truncate pgbench_history, x", "TRUNCATE pgbench_history"},
		{"COPY pgbench_accounts FROM STDIN", "COPY pgbench_accounts"},
		{"COPY (SELECT * FROM t) TO STDOUT", "COPY"},
		{"LOCK TABLE accounts IN EXCLUSIVE MODE", "LOCK accounts"},
		{"TABLE accounts", "TABLE accounts"},
		{"VALUES (1, 'x')", "VALUES"},
		// DDL
		{"CREATE TABLE IF NOT EXISTS users (id int)", "CREATE TABLE users"},
		{"create unlogged table t2 (a int)", "CREATE TABLE t2"},
		{"CREATE OR REPLACE FUNCTION f() RETURNS int AS $$ SELECT 1 FROM x $$ LANGUAGE sql", "CREATE FUNCTION"},
		{"CREATE MATERIALIZED VIEW mv AS SELECT 1", "CREATE MATERIALIZED VIEW mv"},
		{"CREATE UNIQUE INDEX idx ON t (a)", "CREATE INDEX"},
		{"DROP TABLE IF EXISTS a, b CASCADE", "DROP TABLE a"},
		{"ALTER TABLE ONLY t ADD COLUMN c int", "ALTER TABLE t"},
		{"drop index idx_a", "DROP INDEX"},
		// procedures, prepared statements, settings
		{"CALL refresh_stats(1, 'x')", "CALL refresh_stats"},
		{"PREPARE q1 (int) AS SELECT 1", "PREPARE q1"},
		{"EXECUTE q1(5)", "EXECUTE q1"},
		{"DEALLOCATE ALL", "DEALLOCATE"},
		{"SET search_path TO public", "SET"},
		{"SHOW server_version", "SHOW"},
		{"EXPLAIN ANALYZE SELECT * FROM t", "EXPLAIN"},
		{"vacuum analyze pgbench_branches", "VACUUM"},
		{"LISTEN channel_1", "LISTEN"},
		// multi-statement texts
		{"BEGIN; UPDATE t SET a = 1; COMMIT", "UPDATE t"},
		{"begin isolation level repeatable read; select * from x; commit;", "SELECT x"},
		{"BEGIN;;", "BEGIN"},
		{"SET a = 1; SELECT 1 FROM t", "SET"},
		{";; SELECT 1 FROM t", "SELECT t"},
		// ids and hashes in names
		{"SELECT * FROM events_20240131", "SELECT events_{n}"},
		{"SELECT * FROM t1", "SELECT t1"},
		{`SELECT * FROM "tmp_3f2a9c1e-8b7d-4e21-9a6f-0c1d2e3f4a5b"`, "SELECT tmp_{id}"},
		{"INSERT INTO cache_0123456789abcdef0 VALUES (1)", "INSERT cache_{id}"},
		{"SELECT * FROM pgbench_accounts", "SELECT pgbench_accounts"},
		// not SQL
		{"", ""},
		{"   ", ""},
		{"-- only a comment", ""},
		{"42", ""},
		{"'x'", ""},
	}
	for _, c := range cases {
		got := string(Append(nil, []byte(c.sql), Postgres))
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestAppendMySQL(t *testing.T) {
	cases := []struct{ sql, want string }{
		{"select @@version_comment limit 1", "SELECT"},
		{"SELECT * FROM `shop`.`orders` WHERE id = 7", "SELECT shop.orders"},
		{"SELECT 'x\\' FROM y' FROM z", "SELECT z"},
		{`SELECT "x\" FROM y" FROM z`, "SELECT z"},
		{"SELECT 1 FROM DUAL", "SELECT"},
		{"# hash comment\nSELECT a FROM t", "SELECT t"},
		{"/*!40101 SET NAMES utf8mb4 */", "SET"},
		{"/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001 VIEW `v1` AS SELECT 1 */", "CREATE VIEW v1"},
		{"/*M!100101 SELECT a FROM mt */", "SELECT mt"},
		{"/* plain */ SELECT a FROM t", "SELECT t"},
		{"INSERT IGNORE INTO `shop`.`orders` VALUES (1)", "INSERT shop.orders"},
		{"insert low_priority into t values (1)", "INSERT t"},
		{"INSERT t (a) VALUES (1)", "INSERT t"},
		{"REPLACE INTO kv VALUES (1, 'v')", "REPLACE kv"},
		{"UPDATE LOW_PRIORITY IGNORE t SET a = 'secret'", "UPDATE t"},
		{"DELETE QUICK FROM t WHERE a = 1", "DELETE t"},
		{"DELETE t1 FROM t1 JOIN t2 ON t1.a = t2.a", "DELETE t1"},
		{"CREATE DEFINER=`root`@`%` PROCEDURE p() BEGIN SELECT 1; END", "CREATE PROCEDURE"},
		{"CREATE TEMPORARY TABLE IF NOT EXISTS tmp (a int)", "CREATE TABLE tmp"},
		{"SET NAMES utf8mb4", "SET"},
		{"SET autocommit=0", "SET"},
		{"SHOW TABLES", "SHOW"},
		{"USE shop", "USE"},
		{"START TRANSACTION; INSERT INTO t VALUES (1); COMMIT", "INSERT t"},
		{"CALL `proc_x`(1)", "CALL proc_x"},
		{"LOCK TABLES t READ", "LOCK t"},
		// MySQL has no dollar quotes, E strings or nested comments
		{"SELECT $x FROM t", "SELECT t"},
		{"/* a /* b */ SELECT c FROM t", "SELECT t"},
	}
	for _, c := range cases {
		got := string(Append(nil, []byte(c.sql), MySQL))
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestAppendBounds(t *testing.T) {
	long := strings.Repeat("x", 300)
	// A name past MaxName is cut; the template stays within MaxTemplate.
	got := Append(nil, []byte("SELECT * FROM "+long+"."+long), Postgres)
	if len(got) != len("SELECT ")+MaxName || !strings.HasPrefix(string(got), "SELECT xxx") {
		t.Errorf("long name: %d bytes %q", len(got), got)
	}
	// A FROM past MaxInput is not read.
	got = Append(nil, []byte("SELECT "+strings.Repeat("a, ", MaxInput/3)+" b FROM t"), Postgres)
	if string(got) != "SELECT" {
		t.Errorf("FROM past MaxInput: %q", got)
	}
	// A cut never splits a UTF-8 sequence.
	got = Append(nil, []byte("SELECT * FROM "+strings.Repeat("é", 100)), Postgres)
	if !utf8.Valid(got) || len(got) > MaxTemplate {
		t.Errorf("utf-8 cut: %q", got)
	}
	// Append appends: what dst holds stays.
	got = Append([]byte("prefix:"), []byte("select 1"), Postgres)
	if string(got) != "prefix:SELECT" {
		t.Errorf("append: %q", got)
	}
	// Control bytes in quoted names do not reach the template.
	got = Append(nil, []byte("SELECT * FROM \"a\nb\x00c\""), Postgres)
	if string(got) != "SELECT a_b_c" {
		t.Errorf("control bytes: %q", got)
	}
	// Unterminated strings, comments and quotes end the scan.
	for _, s := range []string{"SELECT 'abc", "SELECT /* x", `SELECT * FROM "abc`, "SELECT $a$ x", "/*!"} {
		if got := Append(nil, []byte(s), Postgres); len(got) > MaxTemplate {
			t.Errorf("%q: %q", s, got)
		}
		if got := Append(nil, []byte(s), MySQL); len(got) > MaxTemplate {
			t.Errorf("%q: %q", s, got)
		}
	}
}

func TestAppendPrefix(t *testing.T) {
	cases := []struct{ sql, want string }{
		{"SELECT a FROM long_table_na", "SELECT"}, // the name may go on
		{"SELECT a FROM long_table_name ", "SELECT long_table_name"},
		{"SELECT a FROM \"Quoted Na", "SELECT"},
		{"SELECT a FROM \"Quoted Name\"", "SELECT"}, // a qualified name may go on
		{"SELECT a FROM \"Quoted Name\" ", "SELECT Quoted Name"},
		{"SELECT a FROM s.t", "SELECT"},
		{"UPDA", ""},
		{"UPDATE", ""}, // could be UPDATED...
		{"UPDATE ", "UPDATE"},
		{"CREATE TAB", "CREATE"},
		{"COMMIT;", "COMMIT"},
	}
	for _, c := range cases {
		if got := string(AppendPrefix(nil, []byte(c.sql), Postgres)); got != c.want {
			t.Errorf("prefix %q: %q, want %q", c.sql, got, c.want)
		}
	}
	// Append past MaxInput reads a prefix.
	sql := "SELECT * FROM " + strings.Repeat("x", MaxInput)
	if got := string(Append(nil, []byte(sql), Postgres)); got != "SELECT" {
		t.Errorf("name cut by MaxInput: %q", got)
	}
}

func TestTemplaterAllocs(t *testing.T) {
	var tp Templater
	q := []byte("SELECT abalance FROM pgbench_accounts WHERE aid = 12345;")
	first := tp.Template(q, Postgres, false)
	if first != "SELECT pgbench_accounts" {
		t.Fatalf("template %q", first)
	}
	if n := testing.AllocsPerRun(200, func() {
		if tp.Template(q, Postgres, false) != first {
			t.Fatal("changed")
		}
	}); n != 0 {
		t.Errorf("a known template allocates %.0f times", n)
	}
	shared := &l7.Interner{}
	a, b := Templater{In: shared}, Templater{In: shared}
	if x, y := a.Template(q, Postgres, false), b.Template(q, Postgres, false); x != y || len(shared.Intern([]byte(x))) == 0 {
		t.Errorf("shared interner: %q %q", x, y)
	}
	if tp.Template([]byte("  "), Postgres, false) != "" {
		t.Error("blank statement has a template")
	}
}

func TestTemplaterCache(t *testing.T) {
	// The cache gives what Append and AppendPrefix give, for a text seen
	// again, the same text as a prefix, and more texts than it holds.
	var tp Templater
	var texts []string
	for i := range 3 * cacheSlots {
		texts = append(texts, fmt.Sprintf("SELECT * FROM t%d WHERE a = %d", i%7, i))
	}
	texts = append(texts, "SELECT a FROM long_table_name", "SELECT a FROM long_table_name")
	for round := range 2 {
		for _, s := range texts {
			for _, prefix := range []bool{false, true} {
				want := string(Append(nil, []byte(s), MySQL))
				if prefix {
					want = string(AppendPrefix(nil, []byte(s), MySQL))
				}
				if got := tp.Template([]byte(s), MySQL, prefix); got != want {
					t.Fatalf("round %d, %q prefix %v: %q, want %q", round, s, prefix, got, want)
				}
			}
		}
	}
	// Dialects are cached apart: a backslash escapes a quote in MySQL only.
	sql := []byte(`SELECT 'x\' FROM y' FROM z`)
	if a, b := tp.Template(sql, MySQL, false), tp.Template(sql, Postgres, false); a != "SELECT z" || b != "SELECT y" {
		t.Errorf("dialects: %q %q", a, b)
	}
}

func TestClass(t *testing.T) {
	cases := map[string]l7.Class{
		"42601": l7.ClientError, // syntax_error
		"42P01": l7.ClientError, // undefined_table
		"42501": l7.ClientError, // insufficient_privilege
		"22012": l7.ClientError, // division_by_zero
		"23505": l7.ClientError, // unique_violation
		"28P01": l7.ClientError, // invalid_password
		"3D000": l7.ClientError, // invalid_catalog_name
		"3F000": l7.ClientError, // invalid_schema_name
		"0A000": l7.ClientError, // feature_not_supported
		"25P02": l7.ClientError, // in_failed_sql_transaction
		"25006": l7.ClientError, // read_only_sql_transaction
		"54001": l7.ClientError, // statement_too_complex
		"P0001": l7.ClientError, // raise_exception
		"08P01": l7.ClientError, // protocol_violation
		"40002": l7.ClientError, // integrity violation at commit
		"42S02": l7.ClientError, // MySQL: unknown table
		"HY000": l7.ClientError, // MySQL general error (refined by the error number)
		"40001": l7.ServerError, // serialization_failure
		"40P01": l7.ServerError, // deadlock_detected
		"53300": l7.ServerError, // too_many_connections
		"53100": l7.ServerError, // disk_full
		"57014": l7.ServerError, // query_canceled (statement_timeout)
		"57P01": l7.ServerError, // admin_shutdown
		"58030": l7.ServerError, // io_error
		"XX000": l7.ServerError, // internal_error
		"XX001": l7.ServerError, // data_corrupted
		"08006": l7.ServerError, // connection_failure
		"08S01": l7.ServerError, // MySQL: communication link failure
		"70100": l7.ServerError, // MySQL: query interrupted
		"HY001": l7.ServerError, // MySQL: out of memory
		"55P03": l7.ServerError, // lock_not_available
		"55000": l7.ClientError, // object_not_in_prerequisite_state
		"F0000": l7.ServerError, // config_file_error
		"ZZ999": l7.ServerError, // undefined class
		"":      l7.ServerError,
		"423":   l7.ServerError,
	}
	for s, want := range cases {
		if got := Class([]byte(s)); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{
		"SELECT a FROM t", "WITH a AS (SELECT 1) SELECT * FROM a", "/*!40101 SET x */", "SELECT $a$ $a$ FROM y",
		"BEGIN; UPDATE t SET a = 1; COMMIT", "CREATE DEFINER=`a`@`b` VIEW v AS SELECT 1", `SELECT * FROM "a""b".c`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, sql []byte, my bool) {
		d := Postgres
		if my {
			d = MySQL
		}
		got := Append(nil, sql, d)
		if len(got) > MaxTemplate {
			t.Fatalf("%d bytes", len(got))
		}
		if bytes.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("template %q holds a control byte", got)
		}
		if len(got) > 0 && (got[0] < 'A' || got[0] > 'Z') {
			t.Fatalf("template %q does not start with a keyword", got)
		}
	})
}

func TestStatements(t *testing.T) {
	var s Statements
	if _, ok := s.Get(1); ok {
		t.Fatal("empty table has a statement")
	}
	// Every one of StatementSlots statements fits, whatever the keys.
	for i := range uint64(StatementSlots) {
		s.Put(Key([]byte(fmt.Sprintf("stmtcache_%d", i))), fmt.Sprint("api", i))
	}
	for i := range uint64(StatementSlots) {
		if api, ok := s.Get(Key([]byte(fmt.Sprintf("stmtcache_%d", i)))); !ok || api != fmt.Sprint("api", i) {
			t.Fatalf("statement %d: %q %v", i, api, ok)
		}
	}
	// One more evicts the least recently used: statement 0 was used first.
	s.Put(Key([]byte("new")), "new")
	if _, ok := s.Get(Key([]byte("stmtcache_0"))); ok {
		t.Error("the least recently used statement was not evicted")
	}
	if api, ok := s.Get(Key([]byte("new"))); !ok || api != "new" {
		t.Errorf("new statement: %q %v", api, ok)
	}
	if _, ok := s.Get(Key([]byte("stmtcache_1"))); !ok {
		t.Error("a recently used statement was evicted")
	}
	// Put replaces, Delete forgets, Reset empties.
	s.Put(7, "a")
	s.Put(7, "b")
	if api, _ := s.Get(7); api != "b" {
		t.Errorf("replaced: %q", api)
	}
	s.Delete(7)
	if _, ok := s.Get(7); ok {
		t.Error("deleted statement found")
	}
	s.Reset()
	if _, ok := s.Get(Key([]byte("new"))); ok {
		t.Error("reset table has a statement")
	}
	if n := testing.AllocsPerRun(100, func() { s.Put(9, "x"); s.Get(9) }); n != 0 {
		t.Errorf("Put/Get allocate %.0f times", n)
	}
}
