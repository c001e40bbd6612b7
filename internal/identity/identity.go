// Package identity resolves who a process or cgroup is: comm, cmdline and
// start time from /proc, and the container and pod a process runs in, read
// from cgroup paths and the container runtimes' state files (no CLI calls).
// Every read is rooted at the host path (GOPHER_HOST_PATH in a container).
package identity

// Process is what galago knows of one process.
type Process struct {
	PID  int
	PPID int
	// Comm is the task name (/proc/<pid>/comm, at most 15 bytes).
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
}

// Container is what galago knows of one container.
type Container struct {
	ID           string // full 64-hex id
	Name         string
	Image        string
	PodID        string // pod uid
	PodName      string
	PodNamespace string
	PodLabels    map[string]string
	CgroupID     uint64
}

// Resolver answers identity questions; implementations cache and are safe
// for concurrent use.
type Resolver interface {
	Process(pid int) (Process, bool)
	Container(id string) (Container, bool)
}
