package container

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/identity/identitytest"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/table"
)

func labelStrings(ls []table.Label) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name + "=" + l.Value
	}
	return out
}

// TestPrivilegedContainerCRINames: a runc container in a Kubernetes cgroup
// layout whose runc state carries no CRI annotations (so its files name
// nothing), and a CRI runtime (a fake RuntimeService on a unix socket)
// that knows it: every row of the container probe, and the rows of a
// process-keyed table for its process, carry the container name, image,
// pod and the requested pod labels the CRI runtime gave, exactly, and a
// container_name snooper selects it by that name; without the runtime API
// only the pod uid of the cgroup path is known.
func TestPrivilegedContainerCRINames(t *testing.T) {
	probetest.RequireTools(t, "runc")
	c := newCtr(t, []string{"/bin/sleep", "600"}, func(spec map[string]any) { delete(spec, "annotations") })

	sock := filepath.Join(t.TempDir(), "cri.sock")
	f := identitytest.StartFakeCRI(t, sock)
	sandbox := randHex(64)
	kube := map[string]string{
		"io.kubernetes.container.name": "web",
		"io.kubernetes.pod.name":       "web-7d9f-x2x4q",
		"io.kubernetes.pod.namespace":  "shop",
		"io.kubernetes.pod.uid":        c.podUID,
	}
	f.Set([]identitytest.Pod{{ID: sandbox, UID: c.podUID, Name: "web-7d9f-x2x4q", Namespace: "shop",
		Labels: map[string]string{"app": "web", "release": "v7"}}},
		[]identitytest.CRIContainer{{ID: c.id, PodID: sandbox, Name: "web", ListImage: "sha256:" + randHex(64),
			StatusImage: "registry.example/shop/web:7.1", Labels: kube}})

	ids := identity.NewResolver("/")
	if err := ids.EnableRuntimes(identity.Runtimes{CRI: []string{"unix://" + sock}}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ids.RunRuntimes(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	probetest.WaitFor(t, "the CRI runtime listed", func() bool { return f.Lists.Load() >= 1 })
	probetest.WaitFor(t, "the container named", func() bool {
		ct, _ := ids.Container(c.id)
		return ct.Name != ""
	})

	p := New(procfs.FS{}, ids, withInterval(300*time.Millisecond))
	rt := probetest.NewRuntime(t, probetest.ProbeName(Name))
	cfg := probe.Config{Params: probe.DefaultParams(), Targets: probetest.NewTargets(snoop.Whitelist, c.pid)}
	if err := p.Start(rt.Context(), cfg, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Shutdown(t, p) })
	short := c.id[:12]
	ours := func(r *table.Record) bool { return r.Str("container_id") == short }
	// Each table's rows are published as they are made: wait for every
	// table checked below, not the first of them only.
	for _, tbl := range []*table.Table{table.ContainerStart, table.ContainerMemory, table.ContainerFile} {
		rt.WaitTable(t, tbl, 1, ours)
	}
	recs := rt.WaitTable(t, table.ContainerCpu, 1, ours)

	host := identity.HostInfo{UUID: "4c4c4544-0000-1000-8000-000000000001", IP: "192.0.2.7"}
	src := &table.Source{Probe: Name, PodLabels: []string{"app", "release", "team"}}
	want := []string{"container_name=web", "container_image=registry.example/shop/web:7.1",
		"pod_id=" + c.podUID, "pod=shop/web-7d9f-x2x4q", "pod_namespace=shop",
		"app=web", "release=v7", "team=not found", "machine_id=" + host.MachineID()}
	enr := identity.NewEnricher(ids, host)
	seen := map[string]bool{}
	for _, r := range rt.Records() {
		if !ours(r) {
			continue
		}
		seen[r.Table.Name] = true
		if got := labelStrings(enr.Enrich(r, src)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s labels\n got %q\nwant %q", r.Table.Name, got, want)
		}
	}
	for _, tbl := range []*table.Table{table.ContainerCpu, table.ContainerMemory, table.ContainerStart, table.ContainerFile} {
		if !seen[tbl.Name] {
			t.Errorf("no %s row for the container", tbl.Name)
		}
	}

	// A process-keyed row of the container's process.
	proc := table.New("galago_test", "proc", "1.0.0",
		table.Field{Name: "tgid", Kind: table.KindKey},
		table.Field{Name: "value", Kind: table.KindGauge})
	pr := proc.NewRecord(time.Now(), time.Second)
	pr.SetStr(0, strconv.Itoa(c.pid))
	st, err := identity.ReadStat("/", c.pid)
	if err != nil {
		t.Fatal(err)
	}
	wantProc := append([]string{"comm=sleep", "cmdline=/bin/sleep 600", "start_time=" + strconv.FormatUint(st.StartTime, 10),
		"container_id=" + short}, want...)
	if got := labelStrings(enr.Enrich(pr, src)); !reflect.DeepEqual(got, wantProc) {
		t.Errorf("process row labels\n got %q\nwant %q", got, wantProc)
	}

	// A container_name snooper selects the container by the CRI name.
	sr := snoop.NewResolver("/", ids, os.Getpid(), nil)
	defer sr.Close()
	set := sr.Watch(snoop.Selectors{ContainerName: []string{"web"}}, snoop.Whitelist)
	defer set.Close()
	probetest.WaitFor(t, "container_name web selects the container's process", func() bool {
		return slices.Equal(set.PIDs(), []int{c.pid})
	})

	// The same row without the runtime API: the cgroup path's pod uid only.
	bare := identity.NewEnricher(identity.NewResolver("/"), host)
	wantBare := []string{"pod_id=" + c.podUID, "machine_id=" + host.MachineID()}
	if got := labelStrings(bare.Enrich(recs[0], src)); !reflect.DeepEqual(got, wantBare) {
		t.Errorf("labels without a runtime API\n got %q\nwant %q", got, wantBare)
	}
}
