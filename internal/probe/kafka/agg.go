package kafkaprobe

import (
	"encoding/hex"
	"net/netip"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/l7/kafka"
	"github.com/galago-project/galago/internal/table"
)

// rowKey is one kafkaprobe row: a client's records of one kind (produced
// or fetched) on one topic of one broker.
type rowKey struct {
	kind           kafka.Kind
	client, server netip.AddrPort
	topic          string
}

// side is the end of a connection its bytes were read at.
type side uint8

const (
	atClient side = iota
	atServer
)

// counts are a row's records as read at each end, since the row was
// first seen. When both ends of a connection are on this host (client
// and broker both traced) they read the same bytes, at slightly different
// times, possibly on either side of a period's end: the row reports the
// growth of the larger count, so each record counts once whichever end
// read it first.
type counts struct {
	end      [2]uint64
	reported uint64
	idle     int // flushes without growth
}

// maxRows bounds the rows followed; records of rows beyond are counted as
// lost.
const maxRows = 4096

// idleFlushes is how many periods a row without records is kept, for the
// slower end of its connection to catch up.
const idleFlushes = 3

// agg aggregates the records of a period.
type agg struct {
	rows map[rowKey]*counts
}

func newAgg() *agg { return &agg{rows: map[rowKey]*counts{}} }

// add counts n records of k read at end s; false when the row bound
// dropped them.
func (a *agg) add(k rowKey, s side, n uint64) bool {
	c := a.rows[k]
	if c == nil {
		if len(a.rows) >= maxRows {
			return false
		}
		c = &counts{}
		a.rows[k] = c
	}
	c.end[s] += n
	return true
}

// flush returns the records of each row that grew in the period and
// starts a new period; rows idle for idleFlushes periods are dropped.
func (a *agg) flush() map[rowKey]uint64 {
	out := map[rowKey]uint64{}
	for k, c := range a.rows {
		cur := max(c.end[atClient], c.end[atServer])
		if cur > c.reported {
			out[k] = cur - c.reported
			c.reported, c.idle = cur, 0
			continue
		}
		if c.idle++; c.idle >= idleFlushes {
			delete(a.rows, k)
		}
	}
	return out
}

// topicName is a topic's name, or for a topic given by id only (Produce
// and Fetch v13+) that no Metadata response named, the id in hex.
func topicName(t kafka.TopicRecords) string {
	if t.Topic != "" || t.TopicID == ([16]byte{}) {
		return t.Topic
	}
	return hex.EncodeToString(t.TopicID[:])
}

// record is a row's kafkaprobe record.
func record(k rowKey, num uint64, end time.Time, period time.Duration) *table.Record {
	t := table.Kafkaprobe
	rec := t.NewRecord(end, period)
	rec.SetStr(t.MustIndex("msg_type"), k.kind.String())
	rec.SetStr(t.MustIndex("client_ip"), k.client.Addr().String())
	rec.SetStr(t.MustIndex("client_port"), strconv.Itoa(int(k.client.Port())))
	rec.SetStr(t.MustIndex("topic"), k.topic)
	rec.SetStr(t.MustIndex("server_ip"), k.server.Addr().String())
	rec.SetStr(t.MustIndex("server_port"), strconv.Itoa(int(k.server.Port())))
	rec.SetNum(t.MustIndex("num"), float64(num))
	return rec
}
