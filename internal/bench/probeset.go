package bench

import (
	"encoding/json"
	"fmt"
	"github.com/galago-project/galago/internal/realsrv"
	"strconv"
)

// ProbeSet is one galago configuration measured against "no agent": the
// features switched on over REST, each with its sub-items, observing the
// whole host ("blacklist":{}), and the accuracy checks that apply to it.
// Probe sets are data (the ProbeSets table).
type ProbeSet struct {
	Name   string
	Probes []ProbeConfig
	Checks []Check
}

// ProbeConfig is one feature, its sub-items (cmd.probe) and the params
// beyond report_period it needs.
type ProbeConfig struct {
	Feature  string
	SubItems []string
	Params   map[string]any
}

// Body is the PUT /<feature> JSON that starts the feature with the report
// period given.
func (p ProbeConfig) Body(reportPeriod int) string {
	params := map[string]any{"report_period": reportPeriod}
	for k, v := range p.Params {
		params[k] = v
	}
	b, _ := json.Marshal(map[string]any{
		"cmd":       map[string]any{"probe": p.SubItems},
		"blacklist": map[string]any{},
		"params":    params,
		"state":     "running",
	})
	return string(b)
}

// The feature configurations of examples/probes.init (make run): every
// sub-item, but tcp_delay (proc_flow_perf net_delay, a sock_ops program
// on every timed write: an on-demand diagnostic).
var (
	baseinfoAll = ProbeConfig{"baseinfo", []string{"cpu", "mem", "nic", "net", "disk", "fs", "proc", "host", "con"}, nil}
	tcpAll      = ProbeConfig{"tcp", []string{"tcp_stats", "tcp_rtt", "tcp_srtt", "tcp_windows", "tcp_rate", "tcp_sockbuf", "tcp_abnormal"}, nil}
	socketAll   = ProbeConfig{"socket", []string{"tcp_socket", "udp_socket"}, nil}
	// l7 with every protocol the workloads speak (and the rest), TLS on.
	l7All = ProbeConfig{"l7", []string{"l7_bytes_metrics", "l7_rpc_metrics"}, map[string]any{
		"l7_protocol": []string{"http", "redis", "pgsql", "mysql", "memcached", "kafka", "mongo", "dns"},
		"support_ssl": 1,
	}}
	// proc with every sub-item galago builds: each syscall of every
	// process of the host passes its sys_enter/sys_exit programs (the
	// servers' and the load generators' alike), every context switch its
	// sched_switch program.
	procAll = ProbeConfig{"proc", []string{"proc_syscall", "proc_io", "proc_net", "proc_fs", "proc_ioctl",
		"proc_offcpu", "proc_pagecache", "proc_dns"}, nil}
)

// Check compares one figure galago reports with the ground truth of a run.
// Galago's figure is the sum, over every report period of the arm, of the
// samples of Family whose labels include Match (the value "{port}" is the
// workload's server port).
type Check struct {
	Name   string
	Family string
	Match  map[string]string
	// Truth picks the ground truth from the server's counters, and the
	// shortfall the load generator's stop can explain (galago may be
	// lower by at most that); false when the server cannot give it (the
	// check is then left out).
	Truth func(realsrv.Counters) (truth, inFlight float64, ok bool)
}

func conns(c realsrv.Counters) (float64, float64, bool)   { return float64(c.Conns), 0, true }
func bytesIn(c realsrv.Counters) (float64, float64, bool) { return float64(c.BytesIn), 0, c.HasBytes }
func bytesOut(c realsrv.Counters) (float64, float64, bool) {
	return float64(c.BytesOut), float64(c.BytesOutInFlight), c.HasBytes
}

// networkChecks hold for the tcp and socket probes: every connection to the
// workload port is counted at both ends (endpoint_tcp), and every byte of
// them (tcp_link; data bytes, the kernel's bytes_received and bytes_acked).
var networkChecks = []Check{
	{Name: "connections accepted (endpoint_tcp passive_open, server)", Family: "gala_gopher_endpoint_tcp_passive_open",
		Match: map[string]string{"role": "server", "server_port": "{port}"}, Truth: conns},
	{Name: "connections made (endpoint_tcp active_open, client)", Family: "gala_gopher_endpoint_tcp_active_open",
		Match: map[string]string{"role": "client", "server_port": "{port}"}, Truth: conns},
	{Name: "bytes received by the server (tcp_link rx_bytes, server)", Family: "gala_gopher_tcp_link_rx_bytes",
		Match: map[string]string{"role": "server", "server_port": "{port}"}, Truth: bytesIn},
	{Name: "bytes sent by the server (tcp_link tx_bytes, server)", Family: "gala_gopher_tcp_link_tx_bytes",
		Match: map[string]string{"role": "server", "server_port": "{port}"}, Truth: bytesOut},
	{Name: "bytes sent by the clients (tcp_link tx_bytes, client)", Family: "gala_gopher_tcp_link_tx_bytes",
		Match: map[string]string{"role": "client", "server_port": "{port}"}, Truth: bytesIn},
	{Name: "bytes received by the clients (tcp_link rx_bytes, client)", Family: "gala_gopher_tcp_link_rx_bytes",
		Match: map[string]string{"role": "client", "server_port": "{port}"}, Truth: bytesOut},
}

func requests(c realsrv.Counters) (float64, float64, bool) {
	return float64(c.Requests), 0, c.HasRequests
}

// l7Checks: every request the server handled is counted on its side
// (l7_rpc req_count, server rows). Servers whose counter is not in the
// probe's unit (pgbench's transactions are several statements) give none.
var l7Checks = []Check{
	{Name: "requests served (l7_rpc req_count, server)", Family: "gala_gopher_l7_req_count",
		Match: map[string]string{"l7_role": "server", "server_port": "{port}"}, Truth: requests},
}

// ProbeSets is every probe set make bench measures, in order. "all" is
// every probe galago has at this commit (the JSON records the exact list).
var ProbeSets = []ProbeSet{
	{Name: "baseinfo", Probes: []ProbeConfig{baseinfoAll}},
	{Name: "tcp+socket", Probes: []ProbeConfig{tcpAll, socketAll}, Checks: networkChecks},
	{Name: "tcp+socket+l7", Probes: []ProbeConfig{tcpAll, socketAll, l7All}, Checks: append(networkChecks[:len(networkChecks):len(networkChecks)], l7Checks...)},
	{Name: "all", Probes: []ProbeConfig{baseinfoAll, tcpAll, socketAll, l7All}, Checks: append(networkChecks[:len(networkChecks):len(networkChecks)], l7Checks...)},
	// proc alone: its cost on syscall-heavy servers (each request is a
	// few syscalls at both ends), A/B interleaved with "no agent" as the
	// others.
	{Name: "proc", Probes: []ProbeConfig{procAll}},
}

// matchLabels resolves a check's label filter for a server port.
func (c Check) matchLabels(port int) map[string]string {
	out := make(map[string]string, len(c.Match))
	for k, v := range c.Match {
		if v == "{port}" {
			v = strconv.Itoa(port)
		}
		out[k] = v
	}
	return out
}

// Features lists the features of a set.
func (s ProbeSet) Features() []string {
	out := make([]string, len(s.Probes))
	for i, p := range s.Probes {
		out[i] = p.Feature
	}
	return out
}

func (s ProbeSet) String() string { return fmt.Sprintf("%s %v", s.Name, s.Features()) }
