// Package opengauss is galago's opengauss_sli feature (gala-gopher's
// pg_stat_probe.py): the committed transactions per second of each
// database of openGauss or PostgreSQL servers, polled from
// pg_stat_database with the pgx driver (github.com/jackc/pgx/v5). No BPF.
//
// openGauss speaks PostgreSQL's frontend/backend protocol (v3) and has
// pg_stat_database with the same columns, so one client serves both;
// this is tested against Debian's PostgreSQL. One caveat: openGauss's
// default password method is its own SHA-256 exchange, which PostgreSQL
// clients (libpq, psycopg2, pgx) do not speak; the monitoring user needs
// an md5 password (password_encryption_type 0 or 1) or trust, as for
// any PostgreSQL client.
//
// Connection settings are gala-gopher's: the servers listed in
// /etc/gala-gopher/extend_probes/pg_stat_probe.conf (galago.pg_stat_conf
// in the config file moves it), YAML
//
//	servers:
//	  - ip: "192.168.0.23"
//	    port: "5432"
//	    dbname: "postgres"
//	    user: "opengauss_exporter"
//	    password: "opengauss_exporter123"
//
// each opened as "host= port= dbname= user= password= connect_timeout=3"
// (sslmode: libpq's default, prefer). A file that is missing or does not
// parse (a missing field, a port out of range) fails the start with an
// error naming the entry and the field. A server that cannot be reached
// is logged once and tried again every period (galago_probe_errors_total
// counts the attempts); gala-gopher's probe exits instead.
//
// Table pg_tps: keys tgid (the process that listens on the server's
// port in galago's network namespace, found through /proc/net/tcp{,6}
// and the processes' fds: PostgreSQL's postmaster, openGauss's gaussdb;
// 0 when no process of this host listens there, a remote server, as
// gala-gopher), ins_id (the database's OID), app "POSTGRE", method "0"
// (gala-gopher's constants); labels server_ip, server_port, datname;
// tps = the increase of xact_commit over the time between two polls.
// gala-gopher divides by report_period; galago by the time measured
// between the reads. Databases template0 and template1 are left out, as
// gala-gopher does, and so is the row of shared objects (no database).
// The first poll only reads the counts; a counter that went back (stats
// reset) gives no row for that period. The probe's own query is one
// committed transaction per poll in the database it connects to.
package opengauss
