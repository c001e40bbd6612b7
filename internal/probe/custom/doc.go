// Package custom runs gala-gopher's custom (third-party) probes: executables
// declared in gala-gopher-custom.json that report on their standard output
// in gala-gopher's extend-probe line format.
//
// # Declaration
//
// /etc/gala-gopher/gala-gopher-custom.json holds up to 8 probes:
//
//	{"<name>": {"bin": "/abs/path", "probe": ["sub", ...≤8], "custom_param": "p1,p2"}, ...}
//
// As in gala-gopher, the file must be owned by root with mode 0640 and each
// bin owned by root with mode 0550, or loading fails (galago also accepts
// stricter modes, which drop bits and so are no less safe). A missing file
// means no custom probes. A probe's tables come from the .meta file next to
// its bin: the bin path with its last extension replaced by ".meta". Each
// probe becomes a feature with IPC type 100+index (1-based, file order),
// configured with PUT /<name> like a built-in one. gala-gopher leaves a
// custom probe's snooper type undefined (its code reads past probe_define[]);
// galago gives them process snoopers, so the observed pids reach the probe.
//
// # Running
//
// The bin is executed directly (argv = [bin], no shell: a script needs its
// #! line) in its own process group. Its stdout carries, one per line (at most 8191 bytes, newline
// terminated):
//
//	|<table_name>|v1|...|vN|                         one record, positional per the .meta
//	|event|<entity_name>|<entity_id>|<metric>|<pid>|<comm>|<ip>|<container_id>|<pod_id>|<dev>|<SEV>|<sevnum>|<body>|
//	|log|<Timestamp>|<SeverityText>|<SeverityNumber>|<Resource>|<Attributes>|<Body>|   an OpenTelemetry log record
//	anything else                                    the debug log; an [INFO], [WARN] or [ERROR] prefix sets the level
//
// A record's first (key) field must not be empty; another empty field (or
// "(null)") is unset and omitted from the outputs. Metric fields are numbers;
// a histogram field is gala-gopher's "<N> <le1> <cum1> ... <leN> <cumN> <sum>
// <max>". A line with an unknown table, a wrong field count, an empty first
// key or a value that does not parse is dropped and counted as a probe error.
// Records carry the probe's report_period and the time the line was read.
// An event's body is its description as written: desc_language does not
// translate a custom probe's text. A |log| line (tprofiling's Kafka mode)
// is six JSON texts (a number, a string, a number, an object, then any two
// values); it goes to the event channel as gala-gopher's
// {"Timestamp","SeverityText","SeverityNumber","Resource","Attributes","Body"}
// object, Resource extended with host.id, host.name and host.ip. gala-gopher
// sends these only to Kafka; galago also writes them to the event log when
// event.out_channel is logs. A |log| line whose fields are not such JSON
// is dropped and counted as a probe error (gala-gopher pastes them
// unchecked). Standard error goes to the debug log by the same prefix rule.
//
// A probe that exits is restarted by the Manager with backoff. Stopping it
// sends SIGINT to its process group, then SIGKILL to what is left of the
// group once the probe has exited, or after 5 s; the probe is reaped.
// Processes that leave the group (setsid) are not tracked. A probe dies with
// galago (parent-death signal), so a restarted galago never runs two copies.
//
// # Configuration: galago's replacement for the SysV message queue
//
// gala-gopher sends a probe its configuration as binary TLVs over a SysV
// message queue, read with its C library or its Python ipc.so. galago does not
// implement that protocol (nor ipc.so); it passes the configuration as JSON
// instead: at start in the environment variable GALAGO_PROBE_CONFIG, and on
// every later change (PUT, or the observed processes changing) as one line on
// the probe's standard input:
//
//	{"probe":["sub",...],"params":{"report_period":60,"sample_period":5000,"latency_thr":0,
//	 "offline_thr":0,"drops_thr":0,"res_lower_thr":0,"res_upper_thr":0,"report_event":0,
//	 "custom_param":{"p1":"v"}},"pids":[...]}
//
// "blacklist":true is added when pids lists processes not to observe, and
// "cgroup_ids" (cgroup2 directory inodes) when the snoopers resolve containers.
// A probe that ignores its stdin keeps running; a configuration line it does
// not read within 1 s fails that reconfiguration.
package custom
