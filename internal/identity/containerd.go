package identity

import (
	"context"
	"fmt"

	containers "github.com/containerd/containerd/api/services/containers/v1"
	namespaces "github.com/containerd/containerd/api/services/namespaces/v1"
	"google.golang.org/grpc/metadata"
)

// containerdNamespaceKey is the gRPC metadata key that scopes a containerd
// call to a namespace (containerd's namespaces.GRPCHeader).
const containerdNamespaceKey = "containerd-namespace"

// containerdSource lists containerd's containers in every namespace
// through its own API (the containers' metadata store): the image name and
// the labels, which name the container for nerdctl (nerdctl/name) and
// carry the Kubernetes ones in k8s.io. Only the small API module is used,
// not the whole containerd client.
type containerdSource struct{ grpcConn }

func newContainerdSource(path, hostPath string) *containerdSource {
	return &containerdSource{grpcConn{path: path, hostPath: hostPath}}
}

func (s *containerdSource) kind() string { return "containerd" }

func (s *containerdSource) list(ctx context.Context) ([]Container, error) {
	cc, err := s.conn()
	if err != nil {
		return nil, err
	}
	ns, err := namespaces.NewNamespacesClient(cc).List(ctx, &namespaces.ListNamespacesRequest{})
	if err != nil {
		return nil, fmt.Errorf("namespaces List: %w", err)
	}
	cs := containers.NewContainersClient(cc)
	var out []Container
	for _, n := range ns.GetNamespaces() {
		nctx := metadata.AppendToOutgoingContext(ctx, containerdNamespaceKey, n.GetName())
		l, err := cs.List(nctx, &containers.ListContainersRequest{})
		if err != nil {
			return nil, fmt.Errorf("containers List in namespace %s: %w", n.GetName(), err)
		}
		for _, c := range l.GetContainers() {
			ct := Container{ID: c.GetID(), Image: c.GetImage(), Labels: c.GetLabels()}
			applyAnnotations(&ct, c.GetLabels())
			out = append(out, ct)
		}
	}
	return out, nil
}
