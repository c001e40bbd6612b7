package identity

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dialUnix returns a gRPC client connection to a unix socket at hostPath
// (created lazily: the first call dials).
func dialUnix(hostPath string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///unix",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hostPath)
		}),
		// A node's container list can exceed gRPC's 4 MiB default
		// (containerd's specs, many pods).
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// grpcConn is a lazily dialled connection shared by one source's calls.
type grpcConn struct {
	path, hostPath string
	mu             sync.Mutex
	cc             *grpc.ClientConn
}

func (g *grpcConn) conn() (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cc == nil {
		cc, err := dialUnix(g.hostPath)
		if err != nil {
			return nil, err
		}
		g.cc = cc
	}
	return g.cc, nil
}

func (g *grpcConn) socket() string { return g.path }

func (g *grpcConn) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cc != nil {
		_ = g.cc.Close()
		g.cc = nil
	}
}

// criSource lists a CRI runtime's running containers and their pod
// sandboxes: ListContainers and ListPodSandbox, plus one ContainerStatus
// per container whose listed image is not a name (kubelet passes the image
// id; the status resolves it to a tag), remembered while the container
// runs.
type criSource struct {
	grpcConn
	images map[string]string // container id -> image name from its status
}

func newCRISource(path, hostPath string) *criSource {
	return &criSource{grpcConn: grpcConn{path: path, hostPath: hostPath}, images: map[string]string{}}
}

func (s *criSource) kind() string { return "cri" }

func (s *criSource) list(ctx context.Context) ([]Container, error) {
	cc, err := s.conn()
	if err != nil {
		return nil, err
	}
	rs := cri.NewRuntimeServiceClient(cc)
	cs, err := rs.ListContainers(ctx, &cri.ListContainersRequest{Filter: &cri.ContainerFilter{
		State: &cri.ContainerStateValue{State: cri.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	ps, err := rs.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	pods := make(map[string]*cri.PodSandbox, len(ps.GetItems()))
	for _, p := range ps.GetItems() {
		pods[p.GetId()] = p
	}
	out := make([]Container, 0, len(cs.GetContainers()))
	images := make(map[string]string, len(cs.GetContainers()))
	for _, c := range cs.GetContainers() {
		ct := criContainer(c, pods[c.GetPodSandboxId()])
		if img, ok := s.images[ct.ID]; ok {
			ct.Image = img
		} else if !isImageName(ct.Image) {
			// A container that exits meanwhile is not found: it keeps
			// the listed image id, and is asked again next time.
			st, err := rs.ContainerStatus(ctx, &cri.ContainerStatusRequest{ContainerId: c.GetId()})
			if img := st.GetStatus().GetImage().GetImage(); err == nil && isImageName(img) {
				ct.Image = img
			}
			if err != nil {
				out = append(out, ct)
				continue
			}
		}
		images[ct.ID] = ct.Image
		out = append(out, ct)
	}
	s.images = images
	return out, nil
}

// criContainer maps a CRI container and its sandbox (nil if not listed).
func criContainer(c *cri.Container, pod *cri.PodSandbox) Container {
	ct := Container{
		ID:     c.GetId(),
		Name:   c.GetMetadata().GetName(),
		Image:  c.GetImage().GetUserSpecifiedImage(),
		Labels: c.GetLabels(),
	}
	if ct.Image == "" {
		ct.Image = c.GetImage().GetImage()
	}
	if pod != nil {
		md := pod.GetMetadata()
		ct.PodID, ct.PodName, ct.PodNamespace = md.GetUid(), md.GetName(), md.GetNamespace()
		ct.PodLabels = podLabels(pod.GetLabels())
	}
	// Kubelet also labels the container with its pod.
	applyAnnotations(&ct, c.GetLabels())
	return ct
}

// podLabels are a sandbox's labels without the ones kubelet adds
// (io.kubernetes.pod.*): what `kubectl get pod --show-labels` shows.
func podLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, "io.kubernetes.pod.") {
			out[k] = v
		}
	}
	return out
}

// isImageName reports whether s names an image rather than being an image
// id ("sha256:<hex>" or bare hex).
func isImageName(s string) bool {
	if s == "" || strings.HasPrefix(s, "sha256:") {
		return false
	}
	return len(s) != 64 || !isHex(s)
}
