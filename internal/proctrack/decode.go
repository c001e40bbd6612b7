package proctrack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/galago-project/galago/internal/identity"
)

// EventType is enum proctrack_event_type.
type EventType uint32

const (
	Fork EventType = EventType(proctrackProctrackEventTypePROCTRACK_FORK)
	Exec EventType = EventType(proctrackProctrackEventTypePROCTRACK_EXEC)
	Exit EventType = EventType(proctrackProctrackEventTypePROCTRACK_EXIT)
	// CgroupMkdir and CgroupRmdir: a cgroup directory was made or removed
	// (Event.CgroupID, Hierarchy, CgroupPath).
	CgroupMkdir EventType = EventType(proctrackProctrackEventTypePROCTRACK_CGROUP_MKDIR)
	CgroupRmdir EventType = EventType(proctrackProctrackEventTypePROCTRACK_CGROUP_RMDIR)
)

func (t EventType) String() string {
	switch t {
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	case CgroupMkdir:
		return "cgroup_mkdir"
	case CgroupRmdir:
		return "cgroup_rmdir"
	}
	return fmt.Sprintf("EventType(%d)", uint32(t))
}

// Event is one process lifecycle change.
type Event struct {
	Type EventType
	// PID is the thread id: for Fork and Exit the process's (PID == TGID
	// for Fork), for Exec the thread that exec'd, which becomes the leader.
	PID  uint32
	TGID uint32
	// PPID is the parent process (real_parent's tgid).
	PPID uint32
	// CgroupID is the process's cgroup2 id (inode of its cgroup2 directory);
	// for CgroupMkdir and CgroupRmdir the cgroup's own id in its hierarchy
	// (the inode of its directory; a cgroup2 id only when Hierarchy is 0).
	CgroupID uint64
	// Hierarchy (cgroup events) is the cgroup's hierarchy id: 0 for
	// cgroup2, a v1 hierarchy's number in /proc/<pid>/cgroup otherwise.
	Hierarchy uint32
	// CgroupPath (cgroup events) is the cgroup's path in its hierarchy, as
	// /proc/<pid>/cgroup gives it ("/kubepods/burstable/pod.../<id>").
	CgroupPath string
	// TimestampNs is CLOCK_MONOTONIC at the event.
	TimestampNs uint64
	// ExitCode is the wait status (code<<8 | signal) for Exit, else 0.
	ExitCode uint32
	// StartBoottimeNs is the process's start time in ns since boot
	// (task->start_boottime, the source of /proc/<pid>/stat's starttime).
	StartBoottimeNs uint64
	// Comm is the task name: the parent's for Fork, the new program's for
	// Exec and Exit.
	Comm string
	// Cmdline is the start of the process's argument area for Fork and
	// Exec (NUL-separated, as /proc/<pid>/cmdline), "" for Exit or when the
	// kernel could not read it. CmdlineSize is the whole area's size:
	// larger than len(Cmdline) when it was cut.
	Cmdline     string
	CmdlineSize uint32
}

// rawEvent is struct proctrack_event, generated from the C definition.
type rawEvent = proctrackProctrackEvent

var r0 rawEvent

// Records are variable-size: the fixed part of struct proctrack_event
// (HeaderSize bytes), then cmdline_len bytes of its cmdline.
const (
	HeaderSize = int(unsafe.Offsetof(r0.Cmdline))
	CmdlineMax = len(r0.Cmdline)
	// TypicalRecordSize sizes the ring's wake-up batches.
	TypicalRecordSize = HeaderSize + 128
)

// Offsets of the header fields, from the generated type.
var (
	offType, offPid, offTgid, offPpid = unsafe.Offsetof(r0.Type), unsafe.Offsetof(r0.Pid), unsafe.Offsetof(r0.Tgid), unsafe.Offsetof(r0.Ppid)
	offCgroup, offTS, offStart        = unsafe.Offsetof(r0.CgroupId), unsafe.Offsetof(r0.TimestampNs), unsafe.Offsetof(r0.StartBoottimeNs)
	offExit, offLen, offSize, offComm = unsafe.Offsetof(r0.ExitCode), unsafe.Offsetof(r0.CmdlineLen), unsafe.Offsetof(r0.CmdlineSize), unsafe.Offsetof(r0.Comm)
	offHierarchy                      = unsafe.Offsetof(r0.HierarchyId)
)

// Decode turns one ring buffer record into an Event. It is pure and never
// panics; records of the wrong size or type are errors.
func Decode(raw []byte) (Event, error) {
	if len(raw) < HeaderSize {
		return Event{}, fmt.Errorf("proctrack: record is %d bytes, want at least %d", len(raw), HeaderSize)
	}
	le := binary.LittleEndian
	u32 := func(off uintptr) uint32 { return le.Uint32(raw[off:]) }
	u64 := func(off uintptr) uint64 { return le.Uint64(raw[off:]) }
	t := EventType(u32(offType))
	if t < Fork || t > CgroupRmdir {
		return Event{}, fmt.Errorf("proctrack: unknown event type %d", uint32(t))
	}
	n := int(u32(offLen))
	if n > CmdlineMax || len(raw) != HeaderSize+n {
		return Event{}, fmt.Errorf("proctrack: record is %d bytes with a cmdline of %d, want %d", len(raw), n, HeaderSize+n)
	}
	comm := raw[offComm : offComm+16]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	if t == CgroupMkdir || t == CgroupRmdir {
		return Event{
			Type: t, PID: u32(offPid), TGID: u32(offTgid), CgroupID: u64(offCgroup), TimestampNs: u64(offTS),
			Comm: string(comm), Hierarchy: u32(offHierarchy), CgroupPath: string(raw[HeaderSize:]),
		}, nil
	}
	return Event{
		Type:            t,
		PID:             u32(offPid),
		TGID:            u32(offTgid),
		PPID:            u32(offPpid),
		CgroupID:        u64(offCgroup),
		TimestampNs:     u64(offTS),
		StartBoottimeNs: u64(offStart),
		ExitCode:        u32(offExit),
		Comm:            string(comm),
		Cmdline:         string(raw[HeaderSize:]),
		CmdlineSize:     u32(offSize),
	}, nil
}

// Process is what the event says of its process, for the identity and
// snoop resolvers: pid, parent, comm, cmdline (NULs turned into spaces, as
// identity reads /proc/<pid>/cmdline), start time in clock ticks (USER_HZ,
// as /proc/<pid>/stat) and cgroup id.
func (e Event) Process() identity.Process {
	p := identity.Process{
		PID: int(e.TGID), PPID: int(e.PPID), Comm: e.Comm,
		StartTime: e.StartBoottimeNs / nsPerClockTick, CgroupID: e.CgroupID,
	}
	if e.Cmdline != "" {
		var args []string
		p.Cmdline, args = identity.ParseCmdline([]byte(e.Cmdline))
		if p.Comm == "java" {
			p.MainClass = identity.JavaMainClass(args)
		}
	}
	return p
}

// nsPerClockTick converts ns to the clock ticks of /proc (USER_HZ = 100 on
// every Linux architecture: the ABI's clock_t, not the kernel's HZ).
const nsPerClockTick = 1_000_000_000 / 100

// Cgroup is what a CgroupMkdir or CgroupRmdir event says, for the identity
// and snoop resolvers.
func (e Event) Cgroup() identity.CgroupEvent {
	return identity.CgroupEvent{Removed: e.Type == CgroupRmdir, Hierarchy: e.Hierarchy, ID: e.CgroupID, Path: e.CgroupPath}
}
