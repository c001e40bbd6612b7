package identity

import (
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

// fakeResolver answers from maps.
type fakeResolver struct {
	procs map[int]Process
	conts map[string]Container
}

func (f fakeResolver) Process(pid int) (Process, bool) { p, ok := f.procs[pid]; return p, ok }

func (f fakeResolver) Container(id string) (Container, bool) {
	for full, c := range f.conts {
		if strings.HasPrefix(full, id) {
			return c, true
		}
	}
	return Container{}, false
}

func render(ls []table.Label) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name + `="` + l.Value + `"`)
	}
	return b.String()
}

func TestEnricherOrder(t *testing.T) {
	ids := fakeResolver{
		procs: map[int]Process{
			300: {PID: 300, Comm: "redis-server", Cmdline: "redis-server *:6379", StartTime: 3000, ContainerID: criID, PodID: podSystemd},
			600: {PID: 600, Comm: "java", Cmdline: "java -cp x com.example.Main", MainClass: "com.example.Main", StartTime: 6000},
			500: {PID: 500, Comm: "httpd", Cmdline: "httpd", StartTime: 5000, ContainerID: ctrID},
			700: {PID: 700, Comm: "nginx", Cmdline: "nginx", StartTime: 7000, ContainerID: mobyID},
		},
		conts: map[string]Container{
			criID:  {ID: criID, Name: "redis", Image: "redis:7.2", PodID: podSystemd, PodName: "cache-0", PodNamespace: "shop"},
			mobyID: {ID: mobyID, Name: "web", Image: "nginx:1.25"},
		},
	}
	host := HostInfo{UUID: "e2b7c9a0-1c2d-4e5f-8a9b-0c1d2e3f4a5b", IP: "192.0.2.2"}
	e := NewEnricher(ids, host)
	mid := `machine_id="e2b7c9a0-1c2d-4e5f-8a9b-0c1d2e3f4a5b-192.0.2.2"`

	tcp := table.New("tcp_metric", "tcp_link", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey},
		table.Field{Name: "comm", Kind: table.KindKey},
		table.Field{Name: "role", Kind: table.KindKey},
		table.Field{Name: "rx_bytes", Kind: table.KindGauge})
	proc := table.New("system_proc", "proc", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey},
		table.Field{Name: "pgid", Kind: table.KindLabel},
		table.Field{Name: "fd_count", Kind: table.KindGauge})
	con := table.New("system_con_io", "container", "1.0.0",
		table.Field{Name: "container_id", Kind: table.KindKey},
		table.Field{Name: "write_rate", Kind: table.KindGauge})
	cpu := table.New("system_cpu", "cpu", "1.0.0",
		table.Field{Name: "cpu", Kind: table.KindKey},
		table.Field{Name: "util_per", Kind: table.KindGauge})

	rec := func(t *table.Table, vals ...string) *table.Record {
		r := t.NewRecord(time.Unix(0, 0), time.Minute)
		for i := 0; i+1 < len(vals); i += 2 {
			r.SetStr(t.MustIndex(vals[i]), vals[i+1])
		}
		return r
	}
	snoopLabels := func(pid int) map[string]string {
		if pid == 300 || pid == 42 {
			return map[string]string{"app": "cache", "tier": "backend"}
		}
		return nil
	}

	for _, tc := range []struct {
		name string
		rec  *table.Record
		src  *table.Source
		want string
	}{
		{"tgid in a pod: snooper labels, container, pod, custom labels, machine_id",
			rec(tcp, "tgid", "300", "comm", "redis-server", "role", "server"),
			&table.Source{SnooperLabels: snoopLabels, CustomLabels: map[string]string{"zone": "a", "env": "prod"}},
			`tgid="300",comm="redis-server",role="server",app="cache",tier="backend",container_id="9f86d081884c",container_name="redis",container_image="redis:7.2",pod_id="0f9c2a3e-1111-2222-3333-444455556666",pod="shop/cache-0",pod_namespace="shop",env="prod",zone="a",` + mid},
		{"table without comm gets it; proc entity gets cmdline (java main class) and start_time",
			rec(proc, "tgid", "600", "pgid", "600"), &table.Source{},
			`tgid="600",pgid="600",comm="java",cmdline="com.example.Main",start_time="6000",` + mid},
		{"container without runtime state: id only, nothing invented",
			rec(proc, "tgid", "500"), nil,
			`tgid="500",comm="httpd",cmdline="httpd",start_time="5000",container_id="6b86b273ff34",` + mid},
		{"container outside kubernetes: no pod labels",
			rec(tcp, "tgid", "700", "role", "client"), nil,
			`tgid="700",role="client",container_id="4b227777d4dd",container_name="web",container_image="nginx:1.25",` + mid},
		{"unknown process: its snooper labels still apply",
			rec(tcp, "tgid", "42", "role", "client"), &table.Source{SnooperLabels: snoopLabels},
			`tgid="42",role="client",app="cache",tier="backend",` + mid},
		{"container table",
			rec(con, "container_id", criID[:12]), nil,
			`container_id="9f86d081884c",container_name="redis",container_image="redis:7.2",pod_id="0f9c2a3e-1111-2222-3333-444455556666",pod="shop/cache-0",pod_namespace="shop",` + mid},
		{"custom labels never override a field of the record or a computed label",
			rec(cpu, "cpu", "3"), &table.Source{CustomLabels: map[string]string{"cpu": "x", "dc": "east", "machine_id": "forged"}},
			`cpu="3",dc="east",` + mid},
		{"no identity at all",
			rec(cpu, "cpu", "0"), nil,
			`cpu="0",` + mid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rec.Extra = e.Enrich(tc.rec, tc.src)
			if got := render(tc.rec.Labels()); got != tc.want {
				t.Errorf("labels\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
