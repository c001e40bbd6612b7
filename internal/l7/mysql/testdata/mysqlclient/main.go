// Command mysqlclient drives a MySQL or MariaDB server with
// go-sql-driver/mysql for the mysql parser's fixture (see
// record_test.go): a ping, text queries, prepared statements (each
// Query with arguments prepares, executes and closes), a statement
// prepared once and executed twice, errors on execute, on prepare and
// in a text query, multi-statement text, a procedure returning two result
// sets, a long parameter sent as COM_STMT_SEND_LONG_DATA, and a large
// row. Every step is part of the expected exchange list in mysql_test.go:
// change both together.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strings"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	dsn := flag.String("dsn", "", "data source name")
	flag.Parse()
	if err := run(*dsn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)

	if err := db.Ping(); err != nil { // COM_PING
		return err
	}
	steps := []string{
		"CREATE TEMPORARY TABLE kv (k INT PRIMARY KEY, v LONGTEXT)",
		"CREATE PROCEDURE IF NOT EXISTS two_sets() BEGIN SELECT 1 AS a; SELECT 2 AS b; END",
	}
	for _, s := range steps {
		if _, err := db.Exec(s); err != nil { // COM_QUERY
			return err
		}
	}
	for i := 1; i <= 3; i++ { // COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE
		if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", i, fmt.Sprint("v", i)); err != nil {
			return err
		}
	}
	stmt, err := db.Prepare("SELECT v FROM kv WHERE k = ?") // one prepare
	if err != nil {
		return err
	}
	var v string
	for _, k := range []int{1, 2} { // two executes, binary result sets
		if err := stmt.QueryRow(k).Scan(&v); err != nil {
			return err
		}
	}
	if err := stmt.Close(); err != nil { // COM_STMT_CLOSE
		return err
	}
	rows, err := db.Query("SELECT k, v FROM kv ORDER BY k") // text result set
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", 1, "dup"); err == nil { // 1062 on execute
		return fmt.Errorf("duplicate insert succeeded")
	}
	if _, err := db.Exec("SELEC v FROM kv WHERE k = ?", 1); err == nil { // 1064 on prepare
		return fmt.Errorf("syntax error succeeded")
	}
	if _, err := db.Exec("SELECT * FROM no_such_table"); err == nil { // 1146 on a text query
		return fmt.Errorf("unknown table succeeded")
	}
	// Two statements in one COM_QUERY (multiStatements=true): two OKs.
	if _, err := db.Exec("UPDATE kv SET v = 'x' WHERE k = 1; UPDATE kv SET v = 'y' WHERE k = 2"); err != nil {
		return err
	}
	rows, err = db.Query("CALL two_sets()") // two result sets and a final OK
	if err != nil {
		return err
	}
	sets := 0
	for {
		for rows.Next() {
		}
		sets++
		if !rows.NextResultSet() {
			break
		}
	}
	rows.Close()
	if sets != 2 {
		return fmt.Errorf("CALL gave %d result sets", sets)
	}
	// A parameter longer than maxAllowedPacket/(params+1): sent with
	// COM_STMT_SEND_LONG_DATA before the execute.
	long := strings.Repeat("z", 40000)
	if _, err := db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", 10, long); err != nil {
		return err
	}
	// A large row: a binary result set bigger than a small capture.
	if err := db.QueryRow("SELECT v FROM kv WHERE k = ?", 10).Scan(&v); err != nil || len(v) != len(long) {
		return fmt.Errorf("large row: %d bytes, %v", len(v), err)
	}
	return nil
}
