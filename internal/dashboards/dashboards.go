// Package dashboards defines galago's Grafana dashboards in Go and renders
// them to the JSON files under deploy/grafana (go generate). One place
// holds every query, so tests can parse each with Prometheus's own PromQL
// parser, check every metric name against galago's tables and run each
// against a real Prometheus scraping a real galago (test/e2e).
//
// The dashboards use two variables: $datasource (a Prometheus data source)
// and $machine_id (the host, gala-gopher's machine_id label, "All" by
// default). Rates use Grafana's $__rate_interval.
//
// gala-gopher's per-period fields (bytes, counts of one report period) are
// gauges, as its exporter serves them: panels show them as they are or
// divided by the period; histograms are cumulative, so they take rate().
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

//go:generate go run ./gen ../../deploy/grafana

// Dashboard is one Grafana dashboard.
type Dashboard struct {
	UID, Title, Description string
	Panels                  []Panel
}

// Panel is one time series panel.
type Panel struct {
	Title, Description string
	Unit               string // Grafana unit id: bytes, Bps, percent, s, short, reqps, percentunit
	Targets            []Target
}

// Target is one query of a panel.
type Target struct {
	Expr, Legend string
}

// host selects the dashboard's machine.
const host = `machine_id=~"$machine_id"`

// All returns galago's dashboards.
func All() []Dashboard {
	return []Dashboard{node(), network(), l7(), health()}
}

func node() Dashboard {
	return Dashboard{UID: "galago-node", Title: "galago / Node", Description: "The host as the baseinfo probe sees it (system_cpu, system_meminfo, system_disk, system_net, system_fs).",
		Panels: []Panel{
			{Title: "CPU busy per CPU", Unit: "percent", Targets: []Target{{`gala_gopher_cpu_total_used_per{` + host + `}`, "cpu {{cpu}}"}}},
			{Title: "CPU time by mode (all CPUs)", Unit: "ms", Description: "Milliseconds spent in each mode during the last report period.", Targets: []Target{
				{`sum(gala_gopher_cpu_user_msec{` + host + `})`, "user"},
				{`sum(gala_gopher_cpu_system_msec{` + host + `})`, "system"},
				{`sum(gala_gopher_cpu_iowait_msec{` + host + `})`, "iowait"},
				{`sum(gala_gopher_cpu_softirq_msec{` + host + `})`, "softirq"},
				{`sum(gala_gopher_cpu_steal_msec{` + host + `})`, "steal"},
			}},
			{Title: "Memory used", Unit: "percent", Targets: []Target{{`gala_gopher_mem_util{` + host + `}`, "used"}, {`gala_gopher_mem_swap_util{` + host + `}`, "swap used"}}},
			{Title: "Memory", Unit: "kbytes", Targets: []Target{
				{`gala_gopher_mem_total_kB{` + host + `}`, "total"},
				{`gala_gopher_mem_available_kB{` + host + `}`, "available"},
				{`gala_gopher_mem_cache_kB{` + host + `}`, "page cache"},
			}},
			{Title: "Disk busy", Unit: "percent", Targets: []Target{{`gala_gopher_disk_util{` + host + `}`, "{{disk_name}}"}}},
			{Title: "Disk throughput", Unit: "KBs", Targets: []Target{
				{`gala_gopher_disk_rspeed_kB{` + host + `}`, "{{disk_name}} read"},
				{`gala_gopher_disk_wspeed_kB{` + host + `}`, "{{disk_name}} write"},
			}},
			{Title: "Network interfaces", Unit: "KBs", Targets: []Target{
				{`gala_gopher_nic_rxspeed_KB{` + host + `}`, "{{dev_name}} in"},
				{`gala_gopher_nic_txspeed_KB{` + host + `}`, "{{dev_name}} out"},
			}},
			{Title: "File systems used", Unit: "percent", Targets: []Target{{`gala_gopher_fs_UsePer{` + host + `}`, "{{MountOn}}"}}},
			{Title: "TCP segments (host)", Unit: "short", Description: "Segments in the last report period, and retransmitted ones.", Targets: []Target{
				{`gala_gopher_net_tcp_in_segs{` + host + `}`, "in"},
				{`gala_gopher_net_tcp_out_segs{` + host + `}`, "out"},
				{`gala_gopher_net_tcp_retrans_segs{` + host + `}`, "retransmitted"},
			}},
		}}
}

func network() Dashboard {
	return Dashboard{UID: "galago-network", Title: "galago / TCP and sockets", Description: "Connections per process and peer (tcp probe: tcp_link) and listening/connecting sockets (socket probe: endpoint_tcp).",
		Panels: []Panel{
			{Title: "Bytes sent per process and server (last period)", Unit: "bytes", Targets: []Target{{`sum by (comm, server_ip, server_port) (gala_gopher_tcp_link_tx_bytes{` + host + `})`, "{{comm}} → {{server_ip}}:{{server_port}}"}}},
			{Title: "Bytes received per process and server (last period)", Unit: "bytes", Targets: []Target{{`sum by (comm, server_ip, server_port) (gala_gopher_tcp_link_rx_bytes{` + host + `})`, "{{comm}} ← {{server_ip}}:{{server_port}}"}}},
			{Title: "Smoothed RTT, p99 per process", Unit: "µs", Targets: []Target{{`histogram_quantile(0.99, sum by (le, comm) (rate(gala_gopher_tcp_link_srtt_bucket{` + host + `}[$__rate_interval])))`, "{{comm}}"}}},
			{Title: "Retransmitted packets per process (last period)", Unit: "short", Targets: []Target{{`sum by (comm) (gala_gopher_tcp_link_retran_packets{` + host + `})`, "{{comm}}"}}},
			{Title: "Connections opened (last period)", Unit: "short", Targets: []Target{
				{`sum by (comm) (gala_gopher_endpoint_tcp_active_open{` + host + `})`, "{{comm}} connect"},
				{`sum by (comm) (gala_gopher_endpoint_tcp_passive_open{` + host + `})`, "{{comm}} accept"},
			}},
			{Title: "Connect latency, p99 per process", Unit: "ms", Targets: []Target{{`histogram_quantile(0.99, sum by (le, comm) (rate(gala_gopher_endpoint_tcp_estab_latency_bucket{` + host + `}[$__rate_interval])))`, "{{comm}}"}}},
			{Title: "Listen queue drops and overflows (last period)", Unit: "short", Targets: []Target{
				{`sum by (comm, server_port) (gala_gopher_endpoint_tcp_listendrop{` + host + `})`, "{{comm}}:{{server_port}} dropped"},
				{`sum by (comm, server_port) (gala_gopher_endpoint_tcp_accept_overflow{` + host + `})`, "{{comm}}:{{server_port}} accept queue full"},
			}},
		}}
}

func l7() Dashboard {
	return Dashboard{UID: "galago-l7", Title: "galago / L7 services", Description: "Requests, errors and latency per service and protocol, client and server side (l7 probe: l7_rpc, l7_rpc_api).",
		Panels: []Panel{
			{Title: "Requests per second per service", Unit: "reqps", Targets: []Target{{`sum by (server_ip, server_port, protocol, l7_role) (gala_gopher_l7_throughput_req{` + host + `})`, "{{protocol}} {{server_ip}}:{{server_port}} ({{l7_role}})"}}},
			{Title: "Errors per service (last period)", Unit: "short", Targets: []Target{{`sum by (server_ip, server_port, protocol, l7_role) (gala_gopher_l7_err_count{` + host + `})`, "{{protocol}} {{server_ip}}:{{server_port}} ({{l7_role}})"}}},
			{Title: "Latency p50 and p99 per service", Unit: "ns", Targets: []Target{
				{`histogram_quantile(0.5, sum by (le, server_ip, server_port, protocol) (rate(gala_gopher_l7_latency_bucket{` + host + `}[$__rate_interval])))`, "p50 {{protocol}} {{server_ip}}:{{server_port}}"},
				{`histogram_quantile(0.99, sum by (le, server_ip, server_port, protocol) (rate(gala_gopher_l7_latency_bucket{` + host + `}[$__rate_interval])))`, "p99 {{protocol}} {{server_ip}}:{{server_port}}"},
			}},
			{Title: "Requests per API (last period)", Unit: "short", Targets: []Target{{`topk(20, sum by (api, protocol, l7_role) (gala_gopher_l7_api_req_count{` + host + `}))`, "{{protocol}} {{api}} ({{l7_role}})"}}},
			{Title: "Bytes per connection's process (last period)", Unit: "bytes", Targets: []Target{
				{`sum by (tgid, protocol) (gala_gopher_l7_bytes_sent{` + host + `})`, "{{tgid}} {{protocol}} sent"},
				{`sum by (tgid, protocol) (gala_gopher_l7_bytes_recv{` + host + `})`, "{{tgid}} {{protocol}} received"},
			}},
		}}
}

func health() Dashboard {
	return Dashboard{UID: "galago-health", Title: "galago / Agent health", Description: "galago's own cost and losses: probes running, BPF time charged to the observed applications, events lost, records dropped, the agent's CPU and memory.",
		Panels: []Panel{
			{Title: "Probes running", Unit: "short", Targets: []Target{{`galago_probe_up`, "{{probe}}"}}},
			{Title: "BPF run time per probe (CPU seconds per second)", Unit: "percentunit", Description: "Time the kernel spent in each probe's BPF programs; it is charged to the applications that triggered them. Exported only when galago runs with GALAGO_BPF_STATS=1 (the kernel's statistics cost two clock reads per program run).", Targets: []Target{{`sum by (probe) (rate(galago_bpf_run_seconds_total[$__rate_interval]))`, "{{probe}}"}}},
			{Title: "Agent CPU and memory", Unit: "short", Targets: []Target{
				{`rate(process_cpu_seconds_total[$__rate_interval])`, "CPU (cores)"},
				{`process_resident_memory_bytes / 2^20`, "RSS (MiB)"},
			}},
			{Title: "Kernel events lost per second", Unit: "short", Description: "Never silent: what a ring buffer or a bound dropped.", Targets: []Target{{`sum by (probe) (rate(galago_probe_events_lost_total[$__rate_interval]))`, "{{probe}}"}}},
			{Title: "Records dropped per second by the store", Unit: "short", Targets: []Target{{`sum by (reason) (rate(galago_records_dropped_total[$__rate_interval]))`, "{{reason}}"}}},
			{Title: "Records per second per probe", Unit: "short", Targets: []Target{{`sum by (probe) (rate(galago_probe_records_total[$__rate_interval]))`, "{{probe}}"}}},
			{Title: "Records held by the store", Unit: "short", Targets: []Target{{`galago_store_records`, "records"}}},
		}}
}

// Expand replaces the dashboard variables as Grafana does for the "All"
// host and a 15 s scrape interval: the query Prometheus receives.
func Expand(expr string) string {
	return strings.NewReplacer("$__rate_interval", "1m", "$machine_id", ".*").Replace(expr)
}

// Render returns the dashboard as Grafana's JSON model (schema 39):
// panels on a two-column grid, a Prometheus data source variable and a
// machine_id variable.
func (d Dashboard) Render() ([]byte, error) {
	type obj = map[string]any
	ds := obj{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	for i, p := range d.Panels {
		var targets []any
		for j, t := range p.Targets {
			targets = append(targets, obj{"datasource": ds, "expr": t.Expr, "legendFormat": t.Legend, "refId": string(rune('A' + j))})
		}
		panels = append(panels, obj{
			"id": i + 1, "type": "timeseries", "title": p.Title, "description": p.Description,
			"datasource":  ds,
			"gridPos":     obj{"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
			"fieldConfig": obj{"defaults": obj{"unit": p.Unit}, "overrides": []any{}},
			"options":     obj{"legend": obj{"displayMode": "list", "placement": "bottom"}, "tooltip": obj{"mode": "multi"}},
			"targets":     targets,
		})
	}
	model := obj{
		"uid": d.UID, "title": d.Title, "description": d.Description,
		"tags": []string{"galago", "gala-gopher"}, "editable": true, "schemaVersion": 39,
		"time": obj{"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "",
		"templating": obj{"list": []any{
			obj{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
			obj{"name": "machine_id", "label": "Host", "type": "query", "datasource": ds,
				"query":      obj{"query": "label_values(gala_gopher_cpu_total_used_per, machine_id)", "refId": "machine_id"},
				"definition": "label_values(gala_gopher_cpu_total_used_per, machine_id)",
				"includeAll": true, "multi": true, "allValue": ".*", "refresh": 2,
				"current": obj{"text": "All", "value": "$__all"}},
		}},
		"panels": panels,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(model); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	return b.Bytes(), nil
}
