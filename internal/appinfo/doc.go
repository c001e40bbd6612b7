// Package appinfo names what a process is — postgres, mysql, redis,
// nginx, memcached, kafka, a java application with its main class, a
// python or node program with its script — from its executable, its
// command line and, as a last resort, the well-known TCP port it listens
// on, the way coroot-node-agent's application type detection does, so
// dashboards can group processes by application.
//
// Detect is pure (tested and fuzzed on fixtures); Read gathers its inputs
// from /proc/<pid>/exe, /proc/<pid>/cmdline, /proc/<pid>/comm and, only
// when those name nothing, the process's listening sockets (its fds
// matched against /proc/<pid>/net/tcp and tcp6) under a root path.
//
// Limits: a renamed binary with a rewritten command line that listens on
// no well-known port is "" (unknown), never guessed; the port rule reads
// the process's network namespace tables, so it is a few file reads per
// unknown process.
package appinfo
