// Package identitytest has fake container runtime APIs for tests: a CRI
// RuntimeService (the k8s.io/cri-api gRPC service) and a Docker Engine API
// server, each on a unix socket in a test's temporary directory.
package identitytest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pod is one pod sandbox of a FakeCRI.
type Pod struct {
	ID, UID, Name, Namespace string
	Labels                   map[string]string
}

// CRIContainer is one container of a FakeCRI. ListImage is what
// ListContainers says of its image (kubelet passes the image id); the
// status says StatusImage, as containerd resolves it to a tag.
type CRIContainer struct {
	ID, PodID, Name        string
	ListImage, StatusImage string
	Labels                 map[string]string
	Exited                 bool
	// Gone makes ContainerStatus answer NotFound, as for a container that
	// exited and was removed between the listing and the status.
	Gone bool
}

// FakeCRI is a CRI runtime service answering ListContainers,
// ContainerStatus, ListPodSandbox and PodSandboxStatus from its fields, like
// containerd's CRI plugin does for running pods.
type FakeCRI struct {
	cri.UnimplementedRuntimeServiceServer
	Socket string

	mu         sync.Mutex
	pods       []Pod
	containers []CRIContainer
	// Lists counts ListContainers calls; Block, when set, holds each
	// ListContainers until it is closed (a hung runtime).
	Lists atomic.Int64
	block chan struct{}
}

// StartFakeCRI serves a FakeCRI on socket (a new unix socket) until the
// test ends.
func StartFakeCRI(t testing.TB, socket string) *FakeCRI {
	t.Helper()
	f := &FakeCRI{Socket: socket}
	srv := grpc.NewServer()
	cri.RegisterRuntimeServiceServer(srv, f)
	serve(t, socket, func(l net.Listener) { _ = srv.Serve(l) }, srv.Stop)
	return f
}

// serve listens on a new unix socket and runs fn on it until the test ends.
func serve(t testing.TB, socket string, fn func(net.Listener), stop func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); fn(l) }()
	t.Cleanup(func() { stop(); <-done })
}

// Set replaces the pods and containers.
func (f *FakeCRI) Set(pods []Pod, containers []CRIContainer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.containers = pods, containers
}

// Block makes ListContainers hang until the returned function is called.
func (f *FakeCRI) Block() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.block = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.block = nil
			f.mu.Unlock()
			close(ch)
		})
	}
}

func (f *FakeCRI) state(c CRIContainer) cri.ContainerState {
	if c.Exited {
		return cri.ContainerState_CONTAINER_EXITED
	}
	return cri.ContainerState_CONTAINER_RUNNING
}

func (f *FakeCRI) ListContainers(ctx context.Context, req *cri.ListContainersRequest) (*cri.ListContainersResponse, error) {
	f.Lists.Add(1)
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*cri.Container
	for _, c := range f.containers {
		st := f.state(c)
		if sv := req.GetFilter().GetState(); sv != nil && sv.GetState() != st {
			continue
		}
		out = append(out, &cri.Container{
			Id: c.ID, PodSandboxId: c.PodID,
			Metadata: &cri.ContainerMetadata{Name: c.Name},
			Image:    &cri.ImageSpec{Image: c.ListImage},
			ImageRef: c.ListImage,
			State:    st,
			Labels:   c.Labels,
		})
	}
	return &cri.ListContainersResponse{Containers: out}, nil
}

func (f *FakeCRI) ContainerStatus(_ context.Context, req *cri.ContainerStatusRequest) (*cri.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.ID == req.GetContainerId() && !c.Gone {
			return &cri.ContainerStatusResponse{Status: &cri.ContainerStatus{
				Id: c.ID, Metadata: &cri.ContainerMetadata{Name: c.Name}, State: f.state(c),
				Image: &cri.ImageSpec{Image: c.StatusImage}, ImageRef: c.ListImage, Labels: c.Labels,
			}}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "container %q not found", req.GetContainerId())
}

func podSandbox(p Pod) *cri.PodSandboxMetadata {
	return &cri.PodSandboxMetadata{Name: p.Name, Uid: p.UID, Namespace: p.Namespace}
}

// kubeletPodLabels are a pod's labels as kubelet gives them to the
// sandbox: the pod's own and its identity.
func kubeletPodLabels(p Pod) map[string]string {
	m := map[string]string{
		"io.kubernetes.pod.name":      p.Name,
		"io.kubernetes.pod.namespace": p.Namespace,
		"io.kubernetes.pod.uid":       p.UID,
	}
	for k, v := range p.Labels {
		m[k] = v
	}
	return m
}

func (f *FakeCRI) ListPodSandbox(context.Context, *cri.ListPodSandboxRequest) (*cri.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*cri.PodSandbox
	for _, p := range f.pods {
		out = append(out, &cri.PodSandbox{Id: p.ID, Metadata: podSandbox(p),
			State: cri.PodSandboxState_SANDBOX_READY, Labels: kubeletPodLabels(p)})
	}
	return &cri.ListPodSandboxResponse{Items: out}, nil
}

func (f *FakeCRI) PodSandboxStatus(_ context.Context, req *cri.PodSandboxStatusRequest) (*cri.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pods {
		if p.ID == req.GetPodSandboxId() {
			return &cri.PodSandboxStatusResponse{Status: &cri.PodSandboxStatus{Id: p.ID, Metadata: podSandbox(p),
				State: cri.PodSandboxState_SANDBOX_READY, Labels: kubeletPodLabels(p)}}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", req.GetPodSandboxId())
}

// FakeDocker is a Docker Engine API answering GET /containers/json.
type FakeDocker struct {
	mu   sync.Mutex
	body string
	// Lists counts GET /containers/json calls.
	Lists atomic.Int64
}

// SetBody replaces the answer of GET /containers/json.
func (f *FakeDocker) SetBody(body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.body = body
}

// StartFakeDocker serves body (a JSON answer of GET /containers/json) on
// socket as the Docker Engine API does, until the test ends. Other paths
// get the API's 404 error body.
func StartFakeDocker(t testing.TB, socket, body string) *FakeDocker {
	t.Helper()
	f := &FakeDocker{body: body}
	mux := http.NewServeMux()
	handle := func(w http.ResponseWriter, r *http.Request) {
		f.Lists.Add(1)
		f.mu.Lock()
		b := f.body
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Api-Version", "1.47")
		_, _ = w.Write([]byte(b))
	}
	mux.HandleFunc("GET /containers/json", handle)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"page not found"}`))
	})
	srv := &http.Server{Handler: mux}
	serve(t, socket, func(l net.Listener) { _ = srv.Serve(l) }, func() { _ = srv.Close() })
	return f
}

// StartContainerd runs containerd with everything under dir and returns
// its socket.
func StartContainerd(t testing.TB, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "containerd.sock")
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	confPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(15 * time.Second)
	for exec.Command("ctr", "-a", sock, "version").Run() != nil {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd did not answer on %s:\n%s", sock, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sock
}
