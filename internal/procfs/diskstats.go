package procfs

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DiskStat is one line of /proc/diskstats (Documentation/admin-guide/iostats.rst).
// Sector counts are in 512-byte units; times are in milliseconds.
type DiskStat struct {
	Major, Minor uint32
	Name         string

	ReadIOs, ReadMerges, ReadSectors, ReadTicks     uint64
	WriteIOs, WriteMerges, WriteSectors, WriteTicks uint64
	InFlight                                        uint64 // a gauge, not a counter
	IOTicks                                         uint64 // time the device had I/O in flight
	TimeInQueue                                     uint64 // weighted: summed over in-flight requests

	// Since Linux 4.18 (discard) and 5.5 (flush); zero before.
	DiscardIOs, DiscardMerges, DiscardSectors, DiscardTicks uint64
	FlushIOs, FlushTicks                                    uint64
}

// Diskstats reads /proc/diskstats.
func (fs FS) Diskstats() ([]DiskStat, error) {
	return parseFile(fs.proc("diskstats"), parseDiskstats)
}

func parseDiskstats(r io.Reader) ([]DiskStat, error) {
	var out []DiskStat
	s := newScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 14 {
			return nil, fmt.Errorf("line %q has %d columns, want at least 14", s.Text(), len(f))
		}
		major, err1 := strconv.ParseUint(f[0], 10, 32)
		minor, err2 := strconv.ParseUint(f[1], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad device number in %q", s.Text())
		}
		n := min(len(f), 20)
		v, err := parseUints(f[3:n])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f[2], err)
		}
		v = append(v, make([]uint64, 17-len(v))...)
		out = append(out, DiskStat{
			Major: uint32(major), Minor: uint32(minor), Name: f[2],
			ReadIOs: v[0], ReadMerges: v[1], ReadSectors: v[2], ReadTicks: v[3],
			WriteIOs: v[4], WriteMerges: v[5], WriteSectors: v[6], WriteTicks: v[7],
			InFlight: v[8], IOTicks: v[9], TimeInQueue: v[10],
			DiscardIOs: v[11], DiscardMerges: v[12], DiscardSectors: v[13], DiscardTicks: v[14],
			FlushIOs: v[15], FlushTicks: v[16],
		})
	}
	return out, s.Err()
}
