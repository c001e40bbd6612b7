// Command pgxclient drives a PostgreSQL server with pgx v5 for the pgsql
// parser's fixture (see record_test.go): the extended protocol through
// pgx's statement cache, a pipelined batch, errors in a batch and in a
// prepare, and a large parameter. Every step is one line of the expected
// exchange list in pgsql_test.go; change both together.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

func main() {
	addr := flag.String("dsn", "", "connection string")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dsn string) error {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)

	// Simple protocol (Exec without arguments goes as 'Q' in pgx).
	if _, err := c.Exec(ctx, "CREATE TEMP TABLE kv (k int PRIMARY KEY, v text)"); err != nil {
		return err
	}
	// Extended protocol through the statement cache: the first use
	// prepares (Parse/Describe/Sync), each use executes (Bind/Describe/Execute/Sync).
	for i := 1; i <= 3; i++ {
		if _, err := c.Exec(ctx, "INSERT INTO kv (k, v) VALUES ($1, $2)", i, fmt.Sprint("v", i)); err != nil {
			return err
		}
	}
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM kv WHERE k = $1", 2).Scan(&v); err != nil {
		return err
	}
	// A unique violation on an execute.
	if _, err := c.Exec(ctx, "INSERT INTO kv (k, v) VALUES ($1, $2)", 1, "dup"); err == nil {
		return fmt.Errorf("duplicate insert succeeded")
	}
	// A syntax error: the prepare fails, no Execute is sent.
	if _, err := c.Exec(ctx, "SELEC v FROM kv WHERE k = $1", 1); err == nil {
		return fmt.Errorf("syntax error succeeded")
	}
	// A pipelined batch: four queries, one Sync.
	b := &pgx.Batch{}
	b.Queue("UPDATE kv SET v = $1 WHERE k = $2", "x", 1)
	b.Queue("SELECT count(*) FROM kv")
	b.Queue("DELETE FROM kv WHERE k = $1", 3)
	b.Queue("SELECT v FROM kv WHERE k = $1", 1)
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	// A batch whose second query fails: the server skips the rest up to Sync.
	b = &pgx.Batch{}
	b.Queue("UPDATE kv SET v = $1 WHERE k = $2", "y", 2)
	b.Queue("INSERT INTO kv (k, v) VALUES ($1, $2)", 2, "dup")
	b.Queue("SELECT v FROM kv WHERE k = $1", 1)
	if err := c.SendBatch(ctx, b).Close(); err == nil {
		return fmt.Errorf("failing batch succeeded")
	}
	// A large parameter: a Bind bigger than a small capture.
	if _, err := c.Exec(ctx, "INSERT INTO kv (k, v) VALUES ($1, $2)", 10, strings.Repeat("z", 20000)); err != nil {
		return err
	}
	// A large result: DataRows bigger than a small capture.
	if err := c.QueryRow(ctx, "SELECT v FROM kv WHERE k = $1", 10).Scan(&v); err != nil || len(v) != 20000 {
		return fmt.Errorf("large row: %d bytes, %v", len(v), err)
	}
	return nil
}
