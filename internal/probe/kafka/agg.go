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

// counts are a row's records as read at each end: when both ends of a
// connection are traced (client and broker on this host) they read the
// same bytes, and the row takes the larger, not the sum.
type counts [2]uint64

// maxRows bounds a period's rows; records of rows beyond are counted as
// lost.
const maxRows = 4096

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
	c[s] += n
	return true
}

// flush returns the period's rows, each with its record count, and starts
// a new period.
func (a *agg) flush() map[rowKey]uint64 {
	out := make(map[rowKey]uint64, len(a.rows))
	for k, c := range a.rows {
		out[k] = max(c[atClient], c[atServer])
	}
	a.rows = map[rowKey]*counts{}
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
