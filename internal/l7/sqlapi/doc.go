// Package sqlapi is what the PostgreSQL and MySQL parsers share: the API
// template of a SQL statement and the client/server split of SQL errors.
//
// # API template
//
// Append writes a statement's template: its kind (the leading keyword, upper
// case) and, for statements that name a table, the first table:
//
//	SELECT abalance FROM pgbench_accounts WHERE aid = 42        SELECT pgbench_accounts
//	select * from "Public"."Orders" o join items i on ...         SELECT Public.Orders
//	SELECT count(*) FROM (SELECT x FROM t WHERE ...) s            SELECT t
//	SELECT 1, now()  /  SELECT @@version_comment LIMIT 1          SELECT
//	WITH a AS (SELECT ...) UPDATE accounts SET ...                UPDATE accounts
//	INSERT INTO pgbench_history (tid, ...) VALUES ($1, ...)       INSERT pgbench_history
//	INSERT IGNORE INTO `shop`.`orders` VALUES (...)               INSERT shop.orders
//	UPDATE LOW_PRIORITY t SET a = 'secret'                        UPDATE t
//	DELETE FROM ONLY sessions WHERE id = 'x'                      DELETE sessions
//	REPLACE INTO kv VALUES (1, 'v')                               REPLACE kv
//	CREATE TABLE IF NOT EXISTS users (...)                        CREATE TABLE users
//	DROP INDEX idx_a  /  CREATE OR REPLACE FUNCTION f() ...       DROP INDEX  /  CREATE FUNCTION
//	TRUNCATE TABLE pgbench_history                                TRUNCATE pgbench_history
//	CALL refresh_stats(1)                                         CALL refresh_stats
//	BEGIN; UPDATE t SET ...; COMMIT                               UPDATE t
//	BEGIN / START TRANSACTION / COMMIT / END / ROLLBACK           BEGIN / START TRANSACTION / COMMIT / END / ROLLBACK
//	SET NAMES utf8mb4 / SHOW TABLES / USE shop                    SET / SHOW / USE
//	SELECT * FROM events_20240131                                 SELECT events_{n}
//
// Rules:
//   - Only keywords and names reach a template, never literals: strings,
//     numbers, parameters ($1, ?), comments and everything after the first
//     table are skipped. Keywords are upper-cased; names keep their case
//     and lose their quotes ("x", `x`); a schema-qualified name keeps its
//     dots (shop.orders).
//   - Inside a name, a run of 4 or more decimal digits becomes {n}, and a
//     run of 16 or more hexadecimal digits and dashes (with a digit in it:
//     a hash, a UUID) becomes {id}, so partitions and generated names group.
//   - Comments (--, /* */ nested in PostgreSQL, # in MySQL), leading
//     parentheses and empty statements are skipped. MySQL's executable
//     comments (/*!50001 ... */, /*M!... */) are read as SQL, as the server
//     does.
//   - WITH: the template is the main statement's (its first table may be a
//     CTE's name). SELECT: the first table after the FROM at the
//     statement's own nesting level; a FROM (subquery) gives the
//     subquery's table; no FROM (or FROM DUAL) gives "SELECT".
//   - A leading BEGIN or START TRANSACTION followed by more statements in
//     the same text (a multi-statement query) is skipped, so the template
//     is the first statement that does the work.
//   - DDL: CREATE/ALTER/DROP with the object type, plus the name for
//     TABLE, VIEW and SEQUENCE. Other statements: the keyword alone, or
//     the keyword and the name for CALL, EXECUTE and PREPARE (prepared
//     statement names are names, not values).
//   - Bounded: only the first MaxInput bytes of the statement are read, a
//     name is cut at MaxName bytes (at a UTF-8 boundary) and a template is
//     at most MaxTemplate bytes. A statement whose first table lies past
//     MaxInput gets its keyword alone. Text that does not start with a
//     keyword (after comments) gives no template (Append writes nothing).
//
// Append does not allocate; Templater adds interning (l7.Interner), so the
// template string of a known statement costs no allocation either.
//
// # Error classes
//
// Class maps a SQLSTATE (PostgreSQL's ErrorResponse 'C' field, MySQL's ERR
// packet sql_state) to ClientError or ServerError. The rule: ClientError
// when the request itself is at fault and would fail the same way against
// a healthy server; ServerError when the server could not do what a valid
// request asked. By SQLSTATE class (first two characters):
//
//	ClientError  03 09 0A 0B 0F 0L 0P 0Z 20 21 22 23 24 25 26 27 28 2B 2D 2F
//	             34 38 39 3B 3D 3F 42 44 54 55 P0, MySQL's XA and HY
//	             (bad syntax, unknown or forbidden objects, bad data,
//	             constraint violations, bad credentials or database names,
//	             unsupported features, a wrong transaction or cursor state,
//	             errors raised by the user's own routines)
//	ServerError  08 40 53 57 58 70 72 F0 HV XX, and any other class
//	             (lost connections, serialization failures and deadlocks,
//	             insufficient resources, operator intervention: statement
//	             timeout, cancel, shutdown; system, internal and
//	             configuration errors, foreign servers; MySQL's 70100 query
//	             interrupted)
//
// with these subclasses the other way round: 08P01 protocol_violation
// (the client sent a malformed message) and 40002 integrity violation
// found at COMMIT are ClientError; 55P03 lock_not_available (NOWAIT,
// lock_timeout) and HY001 (MySQL: out of memory) are ServerError.
//
// Why: serialization failures and deadlocks (40) and lock timeouts (55P03)
// abort a valid statement to resolve contention, and a retry succeeds, so
// they measure the server under load, not the client. Program limits
// (54: too many columns, a statement too complex) fail the same request
// every time, so they are the client's. An unknown class is ServerError:
// a failure nobody classified is not blamed on the client. MySQL's
// general-purpose HY000 says nothing by itself: the MySQL parser decides
// it from the error number (resource, storage, lock-wait and timeout
// errors are ServerError), and Class alone counts it as ClientError, as
// most HY000 errors are statement errors (wrong values, unknown prepared
// statement, unsafe updates).
package sqlapi
