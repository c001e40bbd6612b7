package identity_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/identity/identitytest"
	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/table"
)

const (
	webID     = "3f5c2a1b9d8e7f60a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	sidecarID = "7e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
	exitedID  = "aa0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
	sandboxID = "5d41402abc4b2a76b9719d911017c592ae1c4e4fa5d6b9c8f1a3e7d2b0c4f6a8"
	webPodUID = "8c6f1b2e-3d4a-4b5c-9d6e-7f8091a2b3c4"
	imageSHA  = "sha256:9b1e8a4f0c2d3e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d"
)

// startRuntimes returns a resolver asking rt, running until the test ends,
// with what it logs.
func startRuntimes(t *testing.T, rt identity.Runtimes, opts ...identity.Option) (*identity.CachingResolver, *probetest.Runtime) {
	t.Helper()
	return startRuntimesAt(t, "/", rt, opts...)
}

// startRuntimesAt is startRuntimes with the host's root at root.
func startRuntimesAt(t *testing.T, root string, rt identity.Runtimes, opts ...identity.Option) (*identity.CachingResolver, *probetest.Runtime) {
	t.Helper()
	opts = append([]identity.Option{identity.WithStateDirs(), identity.WithCgroup2Mount(t.TempDir())}, opts...)
	r := identity.NewResolver(root, opts...)
	logs := probetest.NewRuntime(t)
	if err := r.EnableRuntimes(rt, logs.Logger()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.RunRuntimes(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, logs
}

func waitContainer(t *testing.T, r *identity.CachingResolver, id string) identity.Container {
	t.Helper()
	var c identity.Container
	probetest.WaitFor(t, "runtime API knows "+id, func() bool {
		var ok bool
		c, ok = r.Container(id)
		return ok
	})
	return c
}

func webPod() ([]identitytest.Pod, []identitytest.CRIContainer) {
	pod := identitytest.Pod{ID: sandboxID, UID: webPodUID, Name: "web-0", Namespace: "shop",
		Labels: map[string]string{"app": "web", "tier": "front"}}
	kube := func(name string) map[string]string {
		return map[string]string{
			"io.kubernetes.container.name": name,
			"io.kubernetes.pod.name":       "web-0",
			"io.kubernetes.pod.namespace":  "shop",
			"io.kubernetes.pod.uid":        webPodUID,
		}
	}
	return []identitytest.Pod{pod}, []identitytest.CRIContainer{
		{ID: webID, PodID: sandboxID, Name: "nginx", ListImage: imageSHA, StatusImage: "docker.io/library/nginx:1.25", Labels: kube("nginx")},
		{ID: sidecarID, PodID: sandboxID, Name: "envoy", ListImage: "docker.io/envoyproxy/envoy:v1.30", Labels: kube("envoy")},
		{ID: exitedID, PodID: sandboxID, Name: "init", ListImage: "busybox:1.36", Labels: kube("init"), Exited: true},
	}
}

// TestRuntimeCRI: containers, pods and pod labels from a CRI runtime, the
// image id of a listing resolved by ContainerStatus, exited containers not
// listed, and the enrichment labels of a container table with pod_labels.
func TestRuntimeCRI(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	f := identitytest.StartFakeCRI(t, sock)
	pods, cs := webPod()
	const goneID = "bb0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
	f.Set(pods, append(cs, identitytest.CRIContainer{ID: goneID, PodID: sandboxID, Name: "job", ListImage: imageSHA, Gone: true}))
	r, _ := startRuntimes(t, identity.Runtimes{CRI: []string{"unix://" + sock}})

	want := identity.Container{ID: webID, Name: "nginx", Image: "docker.io/library/nginx:1.25",
		PodID: webPodUID, PodName: "web-0", PodNamespace: "shop",
		PodLabels: map[string]string{"app": "web", "tier": "front"},
		Labels: map[string]string{"io.kubernetes.container.name": "nginx", "io.kubernetes.pod.name": "web-0",
			"io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.uid": webPodUID}}
	if got := waitContainer(t, r, webID); !reflect.DeepEqual(got, want) {
		t.Errorf("Container(web) = %+v\nwant %+v", got, want)
	}
	if got, ok := r.Container(webID[:12]); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("Container(short web id) = %+v %v, want %+v", got, ok, want)
	}
	if got, ok := r.Container(sidecarID); !ok || got.Name != "envoy" || got.Image != "docker.io/envoyproxy/envoy:v1.30" {
		t.Errorf("Container(sidecar) = %+v %v, want envoy with its listed image", got, ok)
	}
	if got, ok := r.Container(exitedID); ok {
		t.Errorf("exited container found: %+v", got)
	}
	// Its status not found: the listing stands, with the listed image id.
	if got, ok := r.Container(goneID); !ok || got.Name != "job" || got.Image != imageSHA {
		t.Errorf("Container(gone) = %+v %v, want job with image %s", got, ok, imageSHA)
	}

	host := identity.HostInfo{UUID: "u", IP: "192.0.2.1"}
	rec := table.ContainerCpu.NewRecord(time.Now(), time.Second)
	rec.SetStr(table.ContainerCpu.MustIndex("container_id"), webID[:12])
	labels := identity.NewEnricher(r, host).Enrich(rec, &table.Source{PodLabels: []string{"app", "version"}})
	var got []string
	for _, l := range labels {
		got = append(got, l.Name+"="+l.Value)
	}
	wantLabels := []string{"container_name=nginx", "container_image=docker.io/library/nginx:1.25",
		"pod_id=" + webPodUID, "pod=shop/web-0", "pod_namespace=shop", "app=web", "version=not found",
		"machine_id=u-192.0.2.1"}
	if !reflect.DeepEqual(got, wantLabels) {
		t.Errorf("labels\n got %q\nwant %q", got, wantLabels)
	}
}

// TestRuntimeHungDoesNotBlock: while a runtime hangs, lookups answer at
// once from what is known; the call times out, is counted, and the next
// listing finds the container.
func TestRuntimeHungDoesNotBlock(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	f := identitytest.StartFakeCRI(t, sock)
	f.Set(webPod())
	release := f.Block()
	defer release()
	r, logs := startRuntimes(t, identity.Runtimes{CRI: []string{sock}, Timeout: 300 * time.Millisecond})
	probetest.WaitFor(t, "a listing under way", func() bool { return f.Lists.Load() >= 1 })
	if c, ok := r.Container(webID); ok {
		t.Fatalf("found %+v while the runtime hangs", c)
	}
	col := r.RuntimeCollector()
	probetest.WaitFor(t, "the hung listing counted", func() bool {
		return testutil.ToFloat64(filtered{col, "galago_identity_runtime_errors_total"}) == 1
	})
	if !strings.Contains(logs.Logs(), "no container runtime API reachable") || !strings.Contains(logs.Logs(), "DeadlineExceeded") {
		t.Errorf("log does not say the runtime timed out:\n%s", logs.Logs())
	}
	release()
	if c := waitContainer(t, r, webID); c.Name != "nginx" {
		t.Errorf("after the runtime answered: %+v", c)
	}
	if n := strings.Count(logs.Logs(), `msg="container runtime API reachable"`); n != 1 {
		t.Errorf("%d reachable lines, want 1:\n%s", n, logs.Logs())
	}
}

// filtered is the series of one metric name of a collector.
type filtered struct {
	c    prometheus.Collector
	name string
}

func (f filtered) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}

// TestRuntimeAbsent: absent sockets cost one log line each, are not
// errors, and leave the file-based answers alone.
func TestRuntimeAbsent(t *testing.T) {
	dir := t.TempDir()
	r, logs := startRuntimes(t, identity.Runtimes{CRI: []string{filepath.Join(dir, "crio.sock")},
		Docker: filepath.Join(dir, "docker.sock")})
	for i := 0; i < 2; i++ {
		if _, ok := r.Container(webID); ok {
			t.Fatal("container found with no runtime")
		}
		time.Sleep(1100 * time.Millisecond) // past the gap between listings
	}
	if l := logs.LogEntries(); len(l) != 1 || !strings.Contains(l[0].Attrs["not_reachable"], "crio.sock (stat") ||
		!strings.Contains(l[0].Attrs["not_reachable"], "docker.sock (stat") {
		t.Errorf("want one line naming both absent sockets, got:\n%s", logs.Logs())
	}
	want := `
# HELP galago_identity_runtime_errors_total Failed listings of the container runtime API (an absent socket is not counted).
# TYPE galago_identity_runtime_errors_total counter
galago_identity_runtime_errors_total{runtime="cri",socket="` + filepath.Join(dir, "crio.sock") + `"} 0
galago_identity_runtime_errors_total{runtime="docker",socket="` + filepath.Join(dir, "docker.sock") + `"} 0
`
	if err := testutil.CollectAndCompare(r.RuntimeCollector(), strings.NewReader(want), "galago_identity_runtime_errors_total"); err != nil {
		t.Error(err)
	}
}

// dockerList is a GET /containers/json answer in the shape of the Engine
// API v1.47 reference (ContainerSummary), with a plain container and one
// of cri-dockerd's (Kubernetes labels, k8s_ name).
const dockerList = `[
 {"Id":"` + webID + `","Names":["/shop-web"],"Image":"nginx:1.25","ImageID":"` + imageSHA + `",
  "Command":"nginx -g 'daemon off;'","Created":1730000000,"Ports":[{"PrivatePort":80,"Type":"tcp"}],
  "Labels":{"com.docker.compose.project":"shop","maintainer":"NGINX Docker Maintainers"},
  "State":"running","Status":"Up 2 hours","HostConfig":{"NetworkMode":"bridge"},
  "NetworkSettings":{"Networks":{"bridge":{"IPAddress":"172.17.0.2"}}},"Mounts":[]},
 {"Id":"` + sidecarID + `","Names":["/k8s_envoy_web-0_shop_` + webPodUID + `_0"],"Image":"envoyproxy/envoy:v1.30",
  "ImageID":"` + imageSHA + `","Command":"envoy","Created":1730000001,"Ports":[],
  "Labels":{"io.kubernetes.container.name":"envoy","io.kubernetes.pod.name":"web-0","io.kubernetes.pod.namespace":"shop",
   "io.kubernetes.pod.uid":"` + webPodUID + `","io.kubernetes.docker.type":"container"},
  "State":"running","Status":"Up 2 hours","HostConfig":{"NetworkMode":"container:` + sandboxID + `"},
  "NetworkSettings":{"Networks":{}},"Mounts":[]}
]`

// TestRuntimeDocker: names, images and labels from the Docker Engine API,
// its socket found under the host root (galago in a container).
func TestRuntimeDocker(t *testing.T) {
	root := t.TempDir()
	f := identitytest.StartFakeDocker(t, filepath.Join(root, "/var/run/docker.sock"), dockerList)
	r, logs := startRuntimesAt(t, root, identity.Runtimes{Docker: "/var/run/docker.sock"})
	want := identity.Container{ID: webID, Name: "shop-web", Image: "nginx:1.25",
		Labels: map[string]string{"com.docker.compose.project": "shop", "maintainer": "NGINX Docker Maintainers"}}
	if got := waitContainer(t, r, webID); !reflect.DeepEqual(got, want) {
		t.Errorf("Container(web) = %+v\nwant %+v", got, want)
	}
	got, ok := r.Container(sidecarID)
	if !ok || got.Name != "envoy" || got.Image != "envoyproxy/envoy:v1.30" || got.PodName != "web-0" ||
		got.PodNamespace != "shop" || got.PodID != webPodUID || got.PodLabels != nil {
		t.Errorf("Container(cri-dockerd envoy) = %+v %v", got, ok)
	}
	want2 := `
# HELP galago_identity_runtime_containers Containers the last listing of the runtime API returned.
# TYPE galago_identity_runtime_containers gauge
galago_identity_runtime_containers{runtime="docker",socket="/var/run/docker.sock"} 2
`
	if err := testutil.CollectAndCompare(r.RuntimeCollector(), strings.NewReader(want2), "galago_identity_runtime_containers"); err != nil {
		t.Error(err)
	}

	// A malformed answer is an error naming what was wrong; what the last
	// good listing said stays.
	f.SetBody(`[{"Id":"web","Names":["/x"]}]`)
	n := f.Lists.Load()
	if _, ok := r.Container(exitedID); ok { // unknown: asks for a listing
		t.Fatal("unknown container found")
	}
	probetest.WaitFor(t, "the bad listing counted", func() bool {
		return f.Lists.Load() > n && testutil.ToFloat64(filtered{r.RuntimeCollector(), "galago_identity_runtime_errors_total"}) == 1
	})
	if got := waitContainer(t, r, webID); !reflect.DeepEqual(got, want) {
		t.Errorf("after a bad listing Container(web) = %+v\nwant %+v", got, want)
	}
	if !strings.Contains(logs.Logs(), `container id \"web\" is not 64 hex digits`) {
		t.Errorf("log does not name the bad id:\n%s", logs.Logs())
	}
}

// TestRuntimeBound: containers listed beyond the cache bound are dropped
// and counted.
func TestRuntimeBound(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	f := identitytest.StartFakeCRI(t, sock)
	f.Set(webPod())
	r, _ := startRuntimes(t, identity.Runtimes{CRI: []string{sock}}, identity.WithCacheSize(16, 1))
	waitContainer(t, r, webID)
	if _, ok := r.Container(sidecarID); ok {
		t.Error("second container kept past a bound of 1")
	}
	// Each listing returns two running containers: one is dropped.
	probetest.WaitFor(t, "one dropped per listing", func() bool {
		n := f.Lists.Load()
		return n >= 1 && testutil.ToFloat64(filtered{r.RuntimeCollector(), "galago_identity_runtime_containers_dropped_total"}) == float64(n)
	})
}

func TestRuntimeBadEndpoint(t *testing.T) {
	r := identity.NewResolver("/")
	for _, rt := range []identity.Runtimes{
		{CRI: []string{"tcp://127.0.0.1:10010"}},
		{Docker: "run/docker.sock"},
	} {
		err := r.EnableRuntimes(rt, nil)
		if err == nil || !strings.Contains(err.Error(), "endpoint") {
			t.Errorf("%+v: err %v, want one naming the endpoint", rt, err)
		}
	}
	if r.RuntimeCollector() != nil {
		t.Error("a failed EnableRuntimes enabled runtimes")
	}
}
