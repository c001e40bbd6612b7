package syscap

import (
	"fmt"

	"github.com/galago-project/galago/internal/l7"
)

// Whole capture: the chunks of the protocols in Config.Whole are captured
// from their first byte up to WholeMax bytes, not a 4 KiB prefix (the
// kafka probe counts the records of every batch of a Fetch response or
// Produce request, whose headers lie all along the message). The kernel
// sends such a chunk in records of CaptureMax bytes, the first flagged
// "more", the next ones "continuation" with their offset; the reader
// joins them into one Data before the handler sees it, so consumers see
// a chunk as before, only with more of its bytes. A record lost to a
// full ring (counted as lost) ends the join there: the handler gets the
// bytes up to it, and the rest of the chunk is a gap as for any prefix
// (Data.Size is the whole chunk's).
const (
	// DefaultWholeMax is Config.WholeMax's default.
	DefaultWholeMax = 64 << 10
	// WholeMaxLimit is the most of a chunk the kernel captures whole
	// (SYSCAP_WHOLE_RECS records).
	WholeMaxLimit = 64 * CaptureMax
	// maxJoins bounds the chunks being joined at once (a join lasts from
	// a chunk's first record to its last, normally a few records later;
	// one whose last records were lost waits for its connection's next
	// record or a sweep), so at most maxJoins * WholeMaxLimit (16 MiB) is
	// held; a chunk past it is handed on with its first record's bytes
	// only (the rest a gap).
	maxJoins = 64
	// staleSweeps is how many sweeps a join waits for records that were
	// lost (normally its records follow each other within microseconds).
	staleSweeps = 1
)

// joins are the chunks being joined, by connection id; only the reading
// goroutine (under Capture.hmu) touches them.
type joins struct {
	m    map[uint64]*join
	free [][]byte // buffers of joins handed on, for the next ones
}

type join struct {
	d      Data
	buf    []byte
	sweeps int
}

func protoMask(ps []l7.Protocol) uint32 {
	var mask uint32
	for _, p := range ps {
		if p > 0 && p < 32 {
			mask |= 1 << p
		}
	}
	return mask
}

func wholeMax(n int) int {
	if n <= 0 {
		return DefaultWholeMax
	}
	return n
}

// checkWhole refuses a WholeMax the kernel cannot honour.
func checkWhole(cfg Config) error {
	if cfg.WholeMax < 0 || cfg.WholeMax > WholeMaxLimit {
		return fmt.Errorf("syscap: WholeMax %d out of range [0, %d]", cfg.WholeMax, WholeMaxLimit)
	}
	return nil
}

// deliverData hands d to the handler, joining the records of a chunk
// captured whole first.
func (c *Capture) deliverData(d *Data) {
	j := &c.joins
	if d.off > 0 {
		w := j.m[d.ConnID]
		if w == nil {
			return // its first records were lost or past maxJoins: a gap
		}
		if d.off != len(w.buf) || d.Dir != w.d.Dir || d.TS != w.d.TS {
			c.flushWhole(d.ConnID) // a record between was lost: the rest is a gap
			return
		}
		w.buf = append(w.buf, d.Bytes...)
		if !d.more {
			c.flushWhole(d.ConnID)
		}
		return
	}
	if len(j.m) > 0 {
		c.flushWhole(d.ConnID) // a join whose last records were lost
	}
	if !d.more || len(j.m) >= maxJoins {
		d.more = false
		c.opts.Handler.Data(d)
		return
	}
	if j.m == nil {
		j.m = map[uint64]*join{}
	}
	w := &join{d: *d}
	if n := len(j.free); n > 0 {
		w.buf, j.free = j.free[n-1][:0], j.free[:n-1]
	}
	w.buf = append(w.buf, d.Bytes...)
	w.d.Bytes = nil
	j.m[d.ConnID] = w
}

// flushWhole hands on the chunk being joined on connection id, if any.
func (c *Capture) flushWhole(id uint64) {
	w := c.joins.m[id]
	if w == nil {
		return
	}
	delete(c.joins.m, id)
	w.d.Bytes, w.d.more = w.buf, false
	c.opts.Handler.Data(&w.d)
	if len(c.joins.free) < 4 {
		c.joins.free = append(c.joins.free, w.buf[:0])
	}
}

// flushStaleWhole hands on the joins that waited a sweep for their lost
// last records.
func (c *Capture) flushStaleWhole() {
	for id, w := range c.joins.m {
		if w.sweeps++; w.sweeps > staleSweeps {
			c.flushWhole(id)
		}
	}
}
