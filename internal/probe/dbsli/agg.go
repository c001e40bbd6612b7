package dbsli

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/table"
)

// rowKey is one row of both tables: a server connection (process and
// socket fd) and a method.
type rowKey struct {
	tgid   uint32
	fd     uint32
	method string
}

// row is a period's requests of one rowKey.
type row struct {
	server, client netip.AddrPort
	count          uint64
	sum, max       uint64 // ns
}

// maxRows bounds a period's rows (connections × methods); requests of
// rows beyond are counted as lost.
const maxRows = 16384

// agg aggregates a view's exchanges per period.
type agg struct {
	rows map[rowKey]*row
}

func newAgg() *agg { return &agg{rows: map[rowKey]*row{}} }

// add counts one request of latency ns; false when the row bound dropped
// it.
func (a *agg) add(k rowKey, server, client netip.AddrPort, ns uint64) bool {
	r := a.rows[k]
	if r == nil {
		if len(a.rows) >= maxRows {
			return false
		}
		r = &row{server: server, client: client}
		a.rows[k] = r
	}
	r.count++
	r.sum += ns
	r.max = max(r.max, ns)
	return true
}

// flush returns the period's rows and starts a new period.
func (a *agg) flush() map[rowKey]*row {
	out := a.rows
	a.rows = map[rowKey]*row{}
	return out
}

// records are a row's records: the mean latency in the sli table and,
// with withMax, the largest in the max table.
func (v *view) records(k rowKey, r *row, end time.Time, period time.Duration, withMax bool) []*table.Record {
	out := []*table.Record{v.record(v.sli, "rtt_nsec", k, r, r.sum/r.count, end, period)}
	if withMax {
		out = append(out, v.record(v.max, "max_rtt_nsec", k, r, r.max, end, period))
	}
	return out
}

func (v *view) record(t *table.Table, field string, k rowKey, r *row, val uint64, end time.Time, period time.Duration) *table.Record {
	rec := t.NewRecord(end, period)
	rec.SetStr(t.MustIndex("tgid"), strconv.FormatUint(uint64(k.tgid), 10))
	rec.SetStr(t.MustIndex("ins_id"), strconv.FormatUint(uint64(k.fd), 10))
	rec.SetStr(t.MustIndex("app"), v.app)
	rec.SetStr(t.MustIndex("method"), k.method)
	rec.SetStr(t.MustIndex("server_ip"), r.server.Addr().String())
	rec.SetStr(t.MustIndex("server_port"), strconv.Itoa(int(r.server.Port())))
	rec.SetStr(t.MustIndex("client_ip"), r.client.Addr().String())
	rec.SetStr(t.MustIndex("client_port"), strconv.Itoa(int(r.client.Port())))
	rec.SetNum(t.MustIndex(field), float64(val))
	return rec
}

// event is gala-gopher's latency_thr event of a row whose slowest request
// took more than thr, or false.
func (v *view) event(k rowKey, r *row, thr time.Duration, now time.Time) (event.Event, bool) {
	if thr <= 0 || r.max <= uint64(thr) {
		var none event.Event
		return none, false
	}
	ip := fmt.Sprintf("CIP(%s:%d), SIP(%s:%d)", r.client.Addr(), r.client.Port(), r.server.Addr(), r.server.Port())
	e := event.New(now, event.SLIExceeded, fmt.Sprintf("%d_%d", k.tgid, k.fd), k.tgid, ip, k.method, r.max)
	e.PID, e.IP = int(k.tgid), ip
	return e, true
}
