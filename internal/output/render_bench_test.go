package output

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
)

// benchTable is shaped like tcp_link: five key labels and one label field,
// four scalar metrics and a histogram with three bounds, so that each
// record exposes exactly 10 series (4 scalars, 4 buckets, _sum, _count).
var benchTable = table.New("bench_link", "bench_link", "1.0.0",
	table.Field{Name: "tgid", Kind: table.KindKey, Description: "Process ID"},
	table.Field{Name: "role", Kind: table.KindKey, Description: "client or server"},
	table.Field{Name: "client_ip", Kind: table.KindKey, Description: "Client IP"},
	table.Field{Name: "server_ip", Kind: table.KindKey, Description: "Server IP"},
	table.Field{Name: "server_port", Kind: table.KindKey, Description: "Server port"},
	table.Field{Name: "comm", Kind: table.KindLabel, Description: "Process name"},
	table.Field{Name: "rx_bytes", Kind: table.KindGauge, Description: "Bytes received"},
	table.Field{Name: "tx_bytes", Kind: table.KindGauge, Description: "Bytes sent"},
	table.Field{Name: "segs_in", Kind: table.KindGauge, Description: "Segments received"},
	table.Field{Name: "retran_packets", Kind: table.KindCounter, Description: "Retransmissions"},
	table.Field{Name: "srtt", Kind: table.KindHistogram, Description: "Smoothed RTT (us)"},
)

const seriesPerRecord = 10

// BenchmarkRender is one /metrics scrape (text format, plain and gzip) of a
// store holding 10k and 100k series: records of benchTable with 9 labels each
// (5 keys, comm, container_id, pod, machine_id), as a node with that many
// tcp_link series. Reported per scrape: time, allocations, bytes and the
// series counted in the output.
func BenchmarkRender(b *testing.B) {
	for _, series := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("series=%dk", series/1000), func(b *testing.B) {
			records := series / seriesPerRecord
			p, exp, clock := newTestPipeline(b, table.Limits{MaxRecords: records})
			for i := range records {
				r := benchTable.NewRecord(clock.t, period)
				r.SetStr(0, fmt.Sprint(1000+i%500))
				r.SetStr(1, "client")
				r.SetStr(2, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
				r.SetStr(3, "10.0.0.1")
				r.SetStr(4, "8080")
				r.SetStr(5, "java")
				for f := 6; f <= 9; f++ {
					r.SetNum(f, float64(i*f))
				}
				h := table.NewHistogram(bounds)
				h.Observe(float64(i % 150))
				r.SetHist(10, h)
				r.Extra = []table.Label{{Name: "container_id", Value: "0123456789ab"}, {Name: "pod", Value: "default/web-0"}, machine}
				p.Record(r, nil)
			}
			h := exp.Handler()
			for _, enc := range []string{"", "gzip"} {
				name := "plain"
				if enc != "" {
					name = enc
				}
				b.Run(name, func(b *testing.B) {
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					if enc != "" {
						req.Header.Set("Accept-Encoding", enc)
					}
					var w *countingWriter
					b.ReportAllocs()
					for b.Loop() {
						w = &countingWriter{header: http.Header{}, lineStart: true}
						h.ServeHTTP(w, req)
						if w.code != 0 && w.code != http.StatusOK {
							b.Fatal(w.code)
						}
					}
					b.ReportMetric(float64(w.n), "bytes/scrape")
					if enc != "" {
						return // compressed: lines cannot be counted
					}
					// The bench table's series plus the self-metrics the
					// pipeline and exporter always expose.
					if w.samples < series {
						b.Fatalf("scrape holds %d samples, want at least %d", w.samples, series)
					}
					b.ReportMetric(float64(w.samples), "series/scrape")
				})
			}
		})
	}
}

// countingWriter is a ResponseWriter that only counts bytes and sample
// lines, so the benchmark measures rendering, not a growing buffer.
type countingWriter struct {
	header    http.Header
	code      int
	n         int
	samples   int
	lineStart bool
	comment   bool
}

func (w *countingWriter) Header() http.Header  { return w.header }
func (w *countingWriter) WriteHeader(code int) { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	for _, c := range p {
		if w.lineStart {
			w.comment = c == '#'
			w.lineStart = false
		}
		if c == '\n' {
			if !w.comment {
				w.samples++
			}
			w.lineStart = true
		}
	}
	return len(p), nil
}

// BenchmarkKafkaWriteRecord is the kafka metric channel's cost on the probe
// path for one tcp_link-like record (benchTable): rendering gala-gopher's
// kafka JSON and queueing it. The broker is down, so the queue is full and
// every call also drops the oldest message: the worst case.
func BenchmarkKafkaWriteRecord(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	prod, err := NewKafkaProducer(KafkaOptions{Brokers: []string{dead}, BatchNumMessages: 100,
		MaxMessages: 10_000, MaxBytes: 64 << 20, CloseTimeout: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	sink := NewMetricKafkaSink(prod, "gala_gopher", "2c1c455d-24a5-897c-ea11-bc08f2d510da")
	r := benchTable.NewRecord(t0, period)
	for i, v := range []string{"1234", "client", "10.1.2.3", "10.0.0.1", "8080", "java"} {
		r.SetStr(i, v)
	}
	for f := 6; f <= 9; f++ {
		r.SetNum(f, float64(1000*f))
	}
	h := table.NewHistogram(bounds)
	h.Observe(42)
	r.SetHist(10, h)
	for range 10_000 {
		_ = sink.WriteRecord(r)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := sink.WriteRecord(r); err != nil {
			b.Fatal(err)
		}
	}
	if prod.Dropped(KafkaDropQueueFull) == 0 {
		b.Fatal("the queue never filled")
	}
}
