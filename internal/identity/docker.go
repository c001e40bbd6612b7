package identity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// maxDockerList bounds the body of one container listing read from dockerd.
const maxDockerList = 64 << 20

// dockerSource lists dockerd's running containers over the Engine API
// (plain HTTP/JSON on its unix socket): GET /containers/json, whose shape
// (Id, Names, Image, Labels) is the same from API v1.24 to v1.51. The path
// carries no version prefix, which dockerd serves as its own current
// version: a fixed prefix would be refused by daemons too old (before
// 25.0 for v1.44) or too new (29.0 dropped everything before v1.44).
type dockerSource struct {
	path   string
	client *http.Client
}

func newDockerSource(path, hostPath string) *dockerSource {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", hostPath)
		},
		MaxIdleConns: 1,
	}
	return &dockerSource{path: path, client: &http.Client{Transport: tr}}
}

func (s *dockerSource) kind() string   { return "docker" }
func (s *dockerSource) socket() string { return s.path }
func (s *dockerSource) close()         { s.client.CloseIdleConnections() }

// dockerContainer is one element of GET /containers/json.
type dockerContainer struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	Labels map[string]string `json:"Labels"`
}

func (s *dockerSource) list(ctx context.Context) ([]Container, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/containers/json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET /containers/json: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return parseDockerList(io.LimitReader(resp.Body, maxDockerList))
}

// parseDockerList decodes a GET /containers/json answer.
func parseDockerList(r io.Reader) ([]Container, error) {
	var l []dockerContainer
	if err := json.NewDecoder(r).Decode(&l); err != nil {
		return nil, fmt.Errorf("GET /containers/json: %w", err)
	}
	out := make([]Container, 0, len(l))
	for _, d := range l {
		if !IsContainerID(d.ID) || len(d.ID) != 64 {
			return nil, fmt.Errorf("GET /containers/json: container id %q is not 64 hex digits", d.ID)
		}
		c := Container{ID: d.ID, Labels: d.Labels}
		// cri-dockerd's containers carry the Kubernetes labels; their
		// docker name (k8s_<container>_<pod>_...) is not the name.
		applyAnnotations(&c, d.Labels)
		if c.Name == "" && len(d.Names) > 0 {
			c.Name = strings.TrimPrefix(d.Names[0], "/")
		}
		if c.Image == "" {
			c.Image = d.Image
		}
		out = append(out, c)
	}
	return out, nil
}
