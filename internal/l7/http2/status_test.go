package http2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/galago-project/galago/internal/l7"
	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestStatuses: the numeric statuses of every fixture's exchanges are the
// ones x/net/http2's Framer and HPACK decoder read from the same bytes:
// each answered stream's final :status, and for gRPC calls the trailers'
// grpc-status (CANCELLED when the client reset the call first). Streams
// complete out of order, so the two are compared as multisets.
func TestStatuses(t *testing.T) {
	for _, f := range fixtures {
		segs := l7test.Load(t, filepath.Join("testdata", f.file))
		want := decodeStatuses(t, segs, f.upgrade)
		t.Logf("%s: %v", f.file, want)
		for _, role := range []l7.Role{l7.Client, l7.Server} {
			t.Run(fmt.Sprintf("%s/%s", f.file, role), func(t *testing.T) {
				got, _, _ := runFixture(l7test.Chunks(segs, role, ts0, step), role, f.upgrade)
				var g []string
				for _, x := range got {
					if x.HasResponse {
						g = append(g, statusKey(int(x.Status), x.GRPC, int(x.GRPCStatus)))
					}
				}
				slices.Sort(g)
				if !slices.Equal(g, want) {
					t.Errorf("statuses\n got %v\nwant %v (x/net/http2)", g, want)
				}
			})
		}
	}
}

func statusKey(status int, grpc bool, code int) string {
	if !grpc {
		return strconv.Itoa(status)
	}
	return fmt.Sprintf("%d/grpc-%d", status, code)
}

// decodeStatuses decodes a fixture's two byte streams with x/net/http2 and
// returns the sorted status keys of its answered streams.
func decodeStatuses(t *testing.T, segs []l7test.Segment, upgrade bool) []string {
	t.Helper()
	var cli, srv []byte
	for _, s := range segs {
		if s.FromClient {
			cli = append(cli, s.Data...)
		} else {
			srv = append(srv, s.Data...)
		}
	}
	if upgrade { // an HTTP/1.1 request with Upgrade: h2c and its 101
		c, s := upgradeSkip(segs)
		cli, srv = cli[c:], srv[s:]
	} else {
		cli = bytes.TrimPrefix(cli, []byte(http2.ClientPreface))
	}
	type stream struct {
		status, code int
		grpc, reset  bool
	}
	streams := map[uint32]*stream{}
	get := func(id uint32) *stream {
		if streams[id] == nil {
			streams[id] = &stream{code: -1}
		}
		return streams[id]
	}
	read := func(b []byte, fromClient bool) {
		fr := http2.NewFramer(nil, bytes.NewReader(b))
		fr.SetMaxReadFrameSize(1 << 24)
		fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
		for {
			f, err := fr.ReadFrame()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("x/net/http2 (client %v): %v", fromClient, err)
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				s := get(f.StreamID)
				for _, hf := range f.Fields {
					switch {
					case hf.Name == "content-type" && strings.HasPrefix(hf.Value, "application/grpc"):
						s.grpc = true
					case fromClient:
					case hf.Name == ":status":
						if n, _ := strconv.Atoi(hf.Value); n >= 200 {
							s.status = n
						}
					case hf.Name == "grpc-status":
						s.code, _ = strconv.Atoi(hf.Value)
					}
				}
			case *http2.RSTStreamFrame:
				if fromClient {
					get(f.StreamID).reset = true
				}
			}
		}
	}
	read(cli, true)
	read(srv, false)
	var out []string
	for _, s := range streams {
		if s.status == 0 {
			continue
		}
		if s.grpc && s.code < 0 && s.reset {
			s.code = GRPCCanceled
		}
		out = append(out, statusKey(s.status, s.grpc, s.code))
	}
	slices.Sort(out)
	return out
}
