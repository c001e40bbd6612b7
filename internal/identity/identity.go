// Package identity resolves who a process or cgroup is: comm, cmdline and
// start time from /proc, and the container and pod a process runs in, read
// from cgroup paths, the container runtimes' state files and, when their
// sockets answer, the runtimes' APIs (no CLI calls). Every read is rooted
// at the host path (GOPHER_HOST_PATH in a container), sockets too. It also
// reads the host's identity (machine_id) and computes the enrichment
// labels of records (Enricher).
//
// Runtime APIs (EnableRuntimes, RunRuntimes): the CRI RuntimeService
// (k8s.io/cri-api: ListContainers of running containers, ListPodSandbox,
// ContainerStatus once per container whose listing gives an image id, not
// a name) on each configured CRI socket; containerd's own API (the small
// github.com/containerd/containerd/api module, not the whole client:
// namespaces List, then containers List in each namespace); the Docker
// Engine API (GET /containers/json over its unix socket, no version
// prefix). Each runtime is listed in the background, with a timeout per
// call, at start, when a container id no runtime listed is looked up (at
// most once per id per 5 s, one listing per second at most) and every
// minute; lookups read the last listing and never wait. The listing
// replaces the previous one; a runtime whose listing fails keeps its last
// good one. CRI answers win over containerd's, containerd's over Docker's,
// and the APIs over the state files, field by field. At most the
// container cache's size (1024) of listed containers are kept, the rest
// counted in galago_identity_runtime_containers_dropped_total. A socket
// that is absent is not an error. The first listing is one log line
// (which runtimes answered, which did not and why), then one line per
// runtime that comes or goes; galago_identity_runtime_up says which
// answer.
//
// Containers as they come and go (CgroupChanged, fed by the daemon from
// the cgroup_mkdir and cgroup_rmdir tracepoints through proctrack): a
// container is live from the first of its cgroup directories a runtime
// makes (in any hierarchy: cgroup v1, v2 and hybrid hosts) to the removal
// of its last, so it is known, with its cgroup2 id and pod, before its
// first process runs, and the snoopers' sets (so the probes' kernel
// filters) hold its cgroups from then (LiveContainers). A just-made
// container is asked for again every 100 ms for 10 s (its state file and
// runtime listing follow its cgroups by milliseconds), and its making
// asks the runtime APIs for a listing at once. A gone container leaves the
// live set; its last answer stays cached for the rows its processes left.
// Containers that existed before galago started are made live the same
// way at start (ScanCgroups walks every mounted hierarchy; the daemon
// feeds its directories to CgroupChanged after subscribing to the
// tracepoints, so none made in between is missed); their Since is the
// scan's time. A directory removed between the walk and its
// registration stays live until galago restarts (a window of
// microseconds). At most the container cache's size are live; the
// others are counted in galago_identity_live_containers_dropped_total.
//
// Limits: container ids are recognised only as 64-hex cgroup path segments
// (docker, containerd, CRI-O, podman, Kubernetes; a containerd `ctr`
// container named by hand is not one). Without a reachable runtime API,
// names, images and pods come from runc state (CRI annotations) or
// docker's config.v2.json; a container known only from its cgroup has an
// id and no name, and pod labels are unknown (only the CRI API has them).
// A container that starts between two listings is named from the listing
// its first lookup asks for: rows enriched before that listing returns
// have the state files' answer. Cgroup ids (the inode under the cgroup2
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
