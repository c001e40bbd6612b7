package identity

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// defaultStateDirs are the runc state roots (each holds <id>/state.json),
// relative to the host root. A "*" matches containerd namespaces.
var defaultStateDirs = []string{
	"/run/runc",                         // runc, CRI-O
	"/run/containerd/runc/*",            // containerd shim v2, one dir per namespace (k8s.io, moby, default)
	"/run/docker/runtime-runc/moby",     // dockerd with its own containerd
	"/var/run/docker/runtime-runc/moby", // same, where /var/run is not a link to /run
}

// dockerContainersDir holds docker's per-container config.v2.json.
const dockerContainersDir = "/var/lib/docker/containers"

// Annotation and label keys the container runtimes set, in order of
// preference for each piece of identity.
var (
	nameKeys  = []string{"io.kubernetes.cri.container-name", "io.kubernetes.container.name", "nerdctl/name"}
	imageKeys = []string{"io.kubernetes.cri.image-name", "io.kubernetes.cri-o.ImageName"}
	podName   = []string{"io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"}
	podNS     = []string{"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"}
	podUID    = []string{"io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"}
)

// runcState is the part of runc's state.json galago reads.
type runcState struct {
	ID     string `json:"id"`
	Config struct {
		// Labels are "bundle=<dir>" and the OCI spec annotations as
		// "key=value".
		Labels  []string `json:"labels"`
		Cgroups struct {
			Path string `json:"path"`
		} `json:"cgroups"`
	} `json:"config"`
	CgroupPaths map[string]string `json:"cgroup_paths"`
}

// stateInfo is what one runc state.json tells about a container.
type stateInfo struct {
	Annotations map[string]string
	Bundle      string
	CgroupsPath string // linux.cgroupsPath, cgroupfs or systemd "slice:prefix:name" form
	Cgroup2Dir  string // absolute path of the cgroup2 directory, "" if not known
}

// parseRuncState parses a runc state.json.
func parseRuncState(b []byte) (stateInfo, error) {
	var st runcState
	if err := json.Unmarshal(b, &st); err != nil {
		return stateInfo{}, err
	}
	info := stateInfo{Annotations: map[string]string{}, CgroupsPath: st.Config.Cgroups.Path}
	for _, l := range st.Config.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		if k == "bundle" {
			info.Bundle = v
			continue
		}
		info.Annotations[k] = v
	}
	// On cgroup2-only hosts runc keys the unified path "", on hybrid hosts
	// too (next to the v1 controllers).
	info.Cgroup2Dir = st.CgroupPaths[""]
	return info, nil
}

// parseSpecAnnotations reads the annotations of an OCI bundle config.json.
func parseSpecAnnotations(b []byte) (map[string]string, error) {
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, err
	}
	return spec.Annotations, nil
}

// dockerConfig is the part of docker's config.v2.json galago reads.
type dockerConfig struct {
	Name   string `json:"Name"`
	Config struct {
		Image  string            `json:"Image"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func parseDockerConfig(b []byte) (dockerConfig, error) {
	var c dockerConfig
	err := json.Unmarshal(b, &c)
	return c, err
}

func first(m map[string]string, keys []string) string {
	for _, k := range keys {
		if v := m[k]; v != "" {
			return v
		}
	}
	return ""
}

// applyAnnotations fills the empty fields of c from runtime annotations or
// labels.
func applyAnnotations(c *Container, m map[string]string) {
	set := func(dst *string, keys []string) {
		if *dst == "" {
			*dst = first(m, keys)
		}
	}
	set(&c.Name, nameKeys)
	set(&c.Image, imageKeys)
	set(&c.PodName, podName)
	set(&c.PodNamespace, podNS)
	set(&c.PodID, podUID)
}

// containerReader reads container identity from the runtimes' files.
type containerReader struct {
	root      string
	stateDirs []string
}

// expandStateDirs expands the configured state roots under the host root.
func (cr *containerReader) expandStateDirs() []string {
	var out []string
	for _, d := range cr.stateDirs {
		p := filepath.Join(cr.root, d)
		if !strings.Contains(d, "*") {
			out = append(out, p)
			continue
		}
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

// fullID expands an abbreviated id by looking for a unique state or docker
// directory that starts with it. It returns "" when none or several match.
func (cr *containerReader) fullID(prefix string) string {
	found := ""
	dirs := append(cr.expandStateDirs(), filepath.Join(cr.root, dockerContainersDir))
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, prefix+"*"))
		for _, p := range m {
			id := filepath.Base(p)
			if len(id) != 64 || !isHex(id) {
				continue
			}
			if found != "" && found != id {
				return ""
			}
			found = id
		}
	}
	return found
}

// read returns what the runtimes' files say of container id; ok is false
// when no runtime knows it.
func (cr *containerReader) read(id string) (c Container, ok bool) {
	c.ID = id
	for _, d := range cr.expandStateDirs() {
		b, err := os.ReadFile(filepath.Join(d, id, "state.json"))
		if err != nil {
			continue
		}
		st, err := parseRuncState(b)
		if err != nil {
			continue
		}
		ok = true
		applyAnnotations(&c, st.Annotations)
		if c.Name == "" && st.Bundle != "" {
			// Older runtimes do not copy annotations into the state's
			// labels; the bundle's config.json has them.
			if b, err := os.ReadFile(filepath.Join(cr.root, st.Bundle, "config.json")); err == nil {
				if ann, err := parseSpecAnnotations(b); err == nil {
					applyAnnotations(&c, ann)
				}
			}
		}
		if c.PodID == "" {
			c.PodID = PodIDFromPath(st.CgroupsPath)
		}
		if st.Cgroup2Dir != "" {
			c.CgroupID = inode(filepath.Join(cr.root, st.Cgroup2Dir))
		}
		break
	}
	if b, err := os.ReadFile(filepath.Join(cr.root, dockerContainersDir, id, "config.v2.json")); err == nil {
		if dc, err := parseDockerConfig(b); err == nil {
			ok = true
			// dockershim and cri-dockerd label Kubernetes containers;
			// their docker name (k8s_<container>_<pod>_...) is not the
			// container's name.
			applyAnnotations(&c, dc.Config.Labels)
			if c.Name == "" {
				c.Name = strings.TrimPrefix(dc.Name, "/")
			}
			if c.Image == "" {
				c.Image = dc.Config.Image
			}
		}
	}
	return c, ok
}

// inode returns the inode number of a path, 0 if it cannot be read. The
// inode of a cgroup2 directory is the id bpf_get_current_cgroup_id returns.
func inode(p string) uint64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

const cgroup2Magic = 0x63677270

// FindCgroup2Mount returns where the cgroup2 hierarchy is mounted under
// root: /sys/fs/cgroup on unified hosts, /sys/fs/cgroup/unified on hybrid
// ones. It returns an error when neither is a cgroup2 mount.
func FindCgroup2Mount(root string) (string, error) {
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		p := filepath.Join(root, d)
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err != nil {
			continue
		}
		if st.Type == cgroup2Magic {
			return p, nil
		}
	}
	return "", &fs.PathError{Op: "find cgroup2 mount", Path: filepath.Join(root, "/sys/fs/cgroup"), Err: errNoCgroup2}
}

var errNoCgroup2 = errors.New("no cgroup2 hierarchy mounted")
