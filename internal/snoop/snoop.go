// Package snoop turns gala-gopher's snoopers (proc_id, proc_name,
// container_id, container_name, pod_id) and blacklists into a live set of
// observed processes and cgroups that probes consume.
//
// Short-lived processes. A process is classified when its fork or exec is
// reported by the lifecycle tracepoints (Resolver.Notify, with what the
// kernel read at the event: comm, cmdline, start time, cgroup), so one that
// exits before /proc is read is still classified; until then the kernel
// side observes it provisionally (bpfrt.FilterSync, DecidedAt). A member
// that exits stays a member for a grace period (Set), so what it leaves
// behind is attributed as when it lived. Limits: a process whose exec event
// is lost (counted in galago_proctrack_events_lost_total) and that exits
// before the next /proc scan is never classified: a whitelist drops its
// data; a cmdline selector sees the first 4096 bytes of the arguments, as
// gala-gopher reads /proc/<pid>/cmdline.
package snoop

// ProcName selects processes by comm (unanchored POSIX ERE on
// /proc/<pid>/comm) and cmdline (substring); Label is added to the metrics of
// the matched processes.
type ProcName struct {
	Comm    string            `json:"comm"`
	Cmdline string            `json:"cmdline"`
	Label   map[string]string `json:"label,omitempty"`
}

// Selectors is the body of "snoopers" or "blacklist".
type Selectors struct {
	ProcID        []int      `json:"proc_id"`
	ProcName      []ProcName `json:"proc_name"`
	PodID         []string   `json:"pod_id"`
	ContainerID   []string   `json:"container_id"`
	ContainerName []string   `json:"container_name"`
}

// Empty reports whether no selector is set.
func (s Selectors) Empty() bool {
	return len(s.ProcID) == 0 && len(s.ProcName) == 0 && len(s.PodID) == 0 &&
		len(s.ContainerID) == 0 && len(s.ContainerName) == 0
}

// Count is the number of selectors.
func (s Selectors) Count() int {
	return len(s.ProcID) + len(s.ProcName) + len(s.PodID) + len(s.ContainerID) + len(s.ContainerName)
}

// Mode says how a Targets set is meant.
type Mode uint8

const (
	// Whitelist: only the resolved processes and cgroups are observed.
	Whitelist Mode = iota
	// Blacklist: everything is observed except the resolved ones.
	Blacklist
)

// Targets is the live, resolved view of one probe's snoopers. It is safe for
// concurrent use; the sets change as processes start and exit.
type Targets interface {
	Mode() Mode
	// Observed reports whether the process is observed under the mode.
	Observed(pid int) bool
	// PIDs is the resolved process set (the listed ones in blacklist mode).
	PIDs() []int
	// CgroupIDs is the resolved cgroup2 id set (inode of the cgroup dir).
	CgroupIDs() []uint64
	// Labels are the proc_name snooper labels of the process, if any.
	Labels(pid int) map[string]string
	// Changed is signalled (non-blocking, coalesced) when the sets change.
	Changed() <-chan struct{}
}
