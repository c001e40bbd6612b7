package http

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestStatuses: every exchange of every fixture carries the status code
// of its response's status line, read here from the fixture's bytes with
// strconv; exchanges without a response carry none.
func TestStatuses(t *testing.T) {
	for _, f := range fixtures {
		segs := loadFixture(t, f.file)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			t.Run(fmt.Sprintf("%s/%s", f.file, role), func(t *testing.T) {
				chunks := l7test.Chunks(segs, role, ts0, step)
				got, _ := run(chunks, role)
				if len(got) != len(f.want) {
					t.Fatalf("%d exchanges, want %d", len(got), len(f.want))
				}
				for i, w := range f.want {
					want := 0
					if w.resp >= 0 {
						line := chunks[w.resp].Data[w.respOff:]
						if !bytes.HasPrefix(line, []byte("HTTP/1.")) || len(line) < 12 {
							t.Fatalf("exchange %d: response segment %d+%d does not start a status line: %.20q", i, w.resp, w.respOff, line)
						}
						n, err := strconv.Atoi(string(line[9:12]))
						if err != nil {
							t.Fatal(err)
						}
						want = n
					}
					if int(got[i].Status) != want || got[i].GRPC {
						t.Errorf("exchange %d (%s): status %d grpc %v, the fixture's response says %d", i, w.api, got[i].Status, got[i].GRPC, want)
					}
				}
			})
		}
	}
	// An interim response does not end the exchange: the final status is
	// the one carried.
	p := NewParser(l7.Client)
	got := feed(p, req(1, "POST /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx"),
		resp(2, "HTTP/1.1 100 Continue\r\n\r\n"), resp(3, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"))
	if len(got) != 1 || got[0].Status != 503 || got[0].Class != l7.ServerError {
		t.Errorf("100 then 503: %+v", got)
	}
}
