package proctrack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// EventType is enum proctrack_event_type.
type EventType uint32

const (
	Fork EventType = EventType(proctrackProctrackEventTypePROCTRACK_FORK)
	Exec EventType = EventType(proctrackProctrackEventTypePROCTRACK_EXEC)
	Exit EventType = EventType(proctrackProctrackEventTypePROCTRACK_EXIT)
)

func (t EventType) String() string {
	switch t {
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
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
	// CgroupID is the process's cgroup2 id (inode of its cgroup2 directory).
	CgroupID uint64
	// TimestampNs is CLOCK_MONOTONIC at the event.
	TimestampNs uint64
	// ExitCode is the wait status (code<<8 | signal) for Exit, else 0.
	ExitCode uint32
	// Comm is the task name: the parent's for Fork, the new program's for
	// Exec and Exit.
	Comm string
}

// rawEvent is struct proctrack_event, generated from the C definition.
type rawEvent = proctrackProctrackEvent

// RecordSize is the size of one ring buffer record.
const RecordSize = int(unsafe.Sizeof(rawEvent{}))

// Decode turns one ring buffer record into an Event. It is pure and never
// panics; records of the wrong size or type are errors.
func Decode(raw []byte) (Event, error) {
	if len(raw) != RecordSize {
		return Event{}, fmt.Errorf("proctrack: record is %d bytes, want %d", len(raw), RecordSize)
	}
	var r rawEvent
	if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
		return Event{}, fmt.Errorf("proctrack: %w", err)
	}
	t := EventType(r.Type)
	if t != Fork && t != Exec && t != Exit {
		return Event{}, fmt.Errorf("proctrack: unknown event type %d", r.Type)
	}
	return Event{
		Type:        t,
		PID:         r.Pid,
		TGID:        r.Tgid,
		PPID:        r.Ppid,
		CgroupID:    r.CgroupId,
		TimestampNs: r.TimestampNs,
		ExitCode:    r.ExitCode,
		Comm:        cString(r.Comm[:]),
	}, nil
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	u := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	if i := bytes.IndexByte(u, 0); i >= 0 {
		u = u[:i]
	}
	return string(u)
}
