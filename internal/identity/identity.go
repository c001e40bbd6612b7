// Package identity resolves who a process or cgroup is: comm, cmdline and
// start time from /proc, and the container and pod a process runs in, read
// from cgroup paths and the container runtimes' state files (no CLI calls).
// Every read is rooted at the host path (GOPHER_HOST_PATH in a container).
// It also reads the host's identity (machine_id) and computes the
// enrichment labels of records (Enricher).
//
// Limits: container ids are recognised only as 64-hex cgroup path segments
// (docker, containerd, CRI-O, podman, Kubernetes; a containerd `ctr`
// container named by hand is not one). Names, images and pods come from
// runc state (CRI annotations) or docker's config.v2.json; a container
// known only from its cgroup has an id and no name, and Kubernetes pod
// labels are not available there (they live in the API server and
// containerd's metadata store). Cgroup ids (the inode under the cgroup2
// mount) need galago in the host's cgroup namespace: in a private one the
// paths in /proc/<pid>/cgroup are relative to galago's own cgroup, so ids
// are 0 (container and pod ids are still found in them).
package identity

// Process is what galago knows of one process.
type Process struct {
	PID  int
	PPID int
	// Comm is the task name, at most 15 bytes: /proc/<pid>/comm, as found
	// in /proc/<pid>/stat.
	Comm string
	// Cmdline is /proc/<pid>/cmdline with NULs turned into spaces, at most
	// 4096 bytes: what proc_name's cmdline substring is matched against.
	Cmdline string
	// MainClass is, for a java process, its main class (or the -jar file or
	// -m module/class), which gala-gopher reports as the cmdline label.
	MainClass string
	// StartTime is the process start time in clock ticks since boot
	// (/proc/<pid>/stat field 22), as gala-gopher's start_time label.
	StartTime   uint64
	ContainerID string // full 64-hex id, "" when not in a container
	PodID       string // pod uid read from the cgroup path, "" when not in a pod
	CgroupID    uint64 // inode of the process's cgroup2 directory, 0 if unknown
	// Exited says the process is gone: this is what was known of it while
	// it lived (kept for a grace period so that data it left behind, such
	// as the last connections it closed, is still labelled).
	Exited bool
}

// Container is what galago knows of one container.
type Container struct {
	ID           string // full 64-hex id
	Name         string
	Image        string
	PodID        string // pod uid
	PodName      string
	PodNamespace string
	// PodLabels are the pod's Kubernetes labels, from the CRI API; nil
	// when no CRI runtime said (unknown), empty when the pod has none.
	PodLabels map[string]string
	// Labels are the container's own labels in its runtime (CRI,
	// containerd or Docker); nil when no runtime API said.
	Labels   map[string]string
	CgroupID uint64
}

// Resolver answers identity questions; implementations cache and are safe
// for concurrent use.
type Resolver interface {
	Process(pid int) (Process, bool)
	Container(id string) (Container, bool)
}
