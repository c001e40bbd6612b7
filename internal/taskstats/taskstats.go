package taskstats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Delay is one kind of wait: how many times and how long in total.
type Delay struct {
	Count   uint64
	TotalNS uint64
}

// Kind names a delay of struct taskstats.
type Kind int

// The delays, in struct taskstats order.
const (
	CPU Kind = iota
	BlockIO
	SwapIn
	FreePages
	Thrashing
	Compaction
	WPCopy
	IRQ
	numKinds
)

// Kinds lists every delay kind.
var Kinds = []Kind{CPU, BlockIO, SwapIn, FreePages, Thrashing, Compaction, WPCopy, IRQ}

var kindNames = [numKinds]string{"cpu", "blkio", "swapin", "freepages", "thrashing", "compact", "wpcopy", "irq"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Stats is the delay accounting of one process (all its threads).
type Stats struct {
	Version uint16
	TGID    uint32
	Delays  [numKinds]Delay
	has     [numKinds]bool
}

// Has says whether the kernel's struct taskstats carries delay k.
func (s *Stats) Has(k Kind) bool { return k >= 0 && k < numKinds && s.has[k] }

// offsets of each delay's count and total in struct taskstats, which only
// ever grows: unix.Taskstats is the kernel's layout.
var fieldOffsets = func() [numKinds][2]uintptr {
	var t unix.Taskstats
	return [numKinds][2]uintptr{
		CPU:        {unsafe.Offsetof(t.Cpu_count), unsafe.Offsetof(t.Cpu_delay_total)},
		BlockIO:    {unsafe.Offsetof(t.Blkio_count), unsafe.Offsetof(t.Blkio_delay_total)},
		SwapIn:     {unsafe.Offsetof(t.Swapin_count), unsafe.Offsetof(t.Swapin_delay_total)},
		FreePages:  {unsafe.Offsetof(t.Freepages_count), unsafe.Offsetof(t.Freepages_delay_total)},
		Thrashing:  {unsafe.Offsetof(t.Thrashing_count), unsafe.Offsetof(t.Thrashing_delay_total)},
		Compaction: {unsafe.Offsetof(t.Compact_count), unsafe.Offsetof(t.Compact_delay_total)},
		WPCopy:     {unsafe.Offsetof(t.Wpcopy_count), unsafe.Offsetof(t.Wpcopy_delay_total)},
		IRQ:        {unsafe.Offsetof(t.Irq_count), unsafe.Offsetof(t.Irq_delay_total)},
	}
}()

// ParseStats decodes a struct taskstats payload (TASKSTATS_TYPE_STATS) in
// host byte order; fields past the payload's end are absent.
func ParseStats(b []byte) (Stats, error) {
	var s Stats
	if len(b) < 2 {
		return s, fmt.Errorf("taskstats: payload of %d bytes, want at least 2", len(b))
	}
	s.Version = binary.NativeEndian.Uint16(b)
	for k := range numKinds {
		off := fieldOffsets[k]
		if uintptr(len(b)) < off[1]+8 {
			continue
		}
		s.Delays[k] = Delay{Count: binary.NativeEndian.Uint64(b[off[0]:]), TotalNS: binary.NativeEndian.Uint64(b[off[1]:])}
		s.has[k] = true
	}
	if !s.has[CPU] {
		return s, fmt.Errorf("taskstats: payload of %d bytes (version %d) ends before the CPU delay", len(b), s.Version)
	}
	return s, nil
}

// ParseReply decodes the attributes of a TASKSTATS_CMD_NEW reply: a
// TASKSTATS_TYPE_AGGR_TGID (or _PID) nest holding the id and the stats.
func ParseReply(data []byte) (Stats, error) {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return Stats{}, fmt.Errorf("taskstats: reply: %w", err)
	}
	var (
		s     Stats
		found bool
		id    uint32
	)
	for ad.Next() {
		switch ad.Type() {
		case unix.TASKSTATS_TYPE_AGGR_TGID, unix.TASKSTATS_TYPE_AGGR_PID:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					switch nd.Type() {
					case unix.TASKSTATS_TYPE_TGID, unix.TASKSTATS_TYPE_PID:
						id = nd.Uint32()
					case unix.TASKSTATS_TYPE_STATS:
						st, err := ParseStats(nd.Bytes())
						if err != nil {
							return err
						}
						s, found = st, true
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return Stats{}, fmt.Errorf("taskstats: reply: %w", err)
	}
	if !found {
		return Stats{}, errors.New("taskstats: reply without TASKSTATS_TYPE_STATS")
	}
	s.TGID = id
	return s, nil
}

// Client queries the TASKSTATS family. Not safe for concurrent use.
type Client struct {
	c      *genetlink.Conn
	family genetlink.Family
}

// ErrUnsupported is returned by Open when the kernel has no TASKSTATS
// family (CONFIG_TASKSTATS off).
var ErrUnsupported = errors.New("taskstats: the kernel has no TASKSTATS generic netlink family (CONFIG_TASKSTATS)")

// Open connects to the TASKSTATS family.
func Open() (*Client, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("taskstats: generic netlink: %w", err)
	}
	f, err := c.GetFamily(unix.TASKSTATS_GENL_NAME)
	if err != nil {
		c.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrUnsupported
		}
		return nil, fmt.Errorf("taskstats: family %s: %w", unix.TASKSTATS_GENL_NAME, err)
	}
	return &Client{c: c, family: f}, nil
}

// Close releases the socket.
func (c *Client) Close() error { return c.c.Close() }

// TGID returns the delays of process tgid summed over its threads. A
// process that is gone gives an error satisfying errors.Is(err, os.ErrNotExist).
func (c *Client) TGID(tgid int) (Stats, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(unix.TASKSTATS_CMD_ATTR_TGID, uint32(tgid))
	attrs, err := ae.Encode()
	if err != nil {
		return Stats{}, err
	}
	msgs, err := c.c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.TASKSTATS_CMD_GET, Version: c.family.Version},
		Data:   attrs,
	}, c.family.ID, netlink.Request)
	if err != nil {
		var oe *netlink.OpError
		if errors.As(err, &oe) && errors.Is(oe.Err, unix.ESRCH) {
			return Stats{}, fmt.Errorf("taskstats: tgid %d: %w", tgid, os.ErrNotExist)
		}
		return Stats{}, fmt.Errorf("taskstats: tgid %d: %w", tgid, err)
	}
	if len(msgs) != 1 {
		return Stats{}, fmt.Errorf("taskstats: tgid %d: %d replies, want 1", tgid, len(msgs))
	}
	s, err := ParseReply(msgs[0].Data)
	if err != nil {
		return Stats{}, err
	}
	if s.TGID != uint32(tgid) {
		return Stats{}, fmt.Errorf("taskstats: asked for tgid %d, got %d", tgid, s.TGID)
	}
	return s, nil
}

// ParseDelayAcct reads the content of /proc/sys/kernel/task_delayacct:
// whether the kernel records the delays other than CPU.
func ParseDelayAcct(b []byte) (bool, error) {
	switch strings.TrimSpace(string(b)) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("taskstats: kernel.task_delayacct: unexpected %q", strings.TrimSpace(string(b)))
}
