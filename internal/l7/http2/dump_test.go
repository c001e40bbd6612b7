package http2

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	xhttp2 "golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// dumpFrames lists a fixture's frames as x/net's Framer (an independent
// implementation) reads them: segment index and offset of each frame's
// first byte, its header, and decoded header fields.
func dumpFrames(t *testing.T, segs []l7test.Segment, fromClient bool, skip int) []string {
	var stream []byte
	var segOf []int
	var offOf []int
	for i, s := range segs {
		if s.FromClient != fromClient {
			continue
		}
		for j := range s.Data {
			segOf = append(segOf, i)
			offOf = append(offOf, j)
		}
		stream = append(stream, s.Data...)
	}
	stream = stream[skip:]
	segOf, offOf = segOf[skip:], offOf[skip:]
	var lines []string
	dec := hpack.NewDecoder(4096, nil)
	pos := 0
	for pos+9 <= len(stream) {
		fr := xhttp2.NewFramer(nil, bytes.NewReader(stream[pos:]))
		fr.MaxHeaderListSize = 1 << 20
		f, err := fr.ReadFrame()
		if err != nil {
			lines = append(lines, fmt.Sprintf("error at %d: %v", pos, err))
			break
		}
		h := f.Header()
		desc := fmt.Sprintf("seg%d+%d %v", segOf[pos], offOf[pos], h)
		switch f := f.(type) {
		case *xhttp2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			var kv []string
			for _, x := range hf {
				v := x.Value
				if len(v) > 40 {
					v = v[:40] + "..."
				}
				kv = append(kv, x.Name+"="+v)
			}
			desc += fmt.Sprintf(" %v %s", err, strings.Join(kv, " "))
		case *xhttp2.RSTStreamFrame:
			desc += fmt.Sprintf(" code=%v", f.ErrCode)
		case *xhttp2.GoAwayFrame:
			desc += fmt.Sprintf(" last=%d code=%v", f.LastStreamID, f.ErrCode)
		}
		lines = append(lines, desc)
		pos += 9 + int(h.Length)
	}
	return lines
}

func TestDumpFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_DUMP") == "" {
		t.Skip("set GALAGO_L7_DUMP=<fixture> to list its frames")
	}
	name := os.Getenv("GALAGO_L7_DUMP")
	segs := l7test.Load(t, filepath.Join("testdata", name))
	for i, s := range segs {
		side := "S"
		if s.FromClient {
			side = "C"
		}
		t.Logf("seg%d %s %d bytes", i, side, len(s.Data))
	}
	skipC, skipS := len(Preface), 0
	if strings.Contains(name, "upgrade") {
		skipC, skipS = upgradeSkip(segs)
	}
	for _, l := range dumpFrames(t, segs, true, skipC) {
		t.Log("C ", l)
	}
	for _, l := range dumpFrames(t, segs, false, skipS) {
		t.Log("S ", l)
	}
}

// upgradeSkip: the HTTP/1 bytes before HTTP/2 in an h2c upgrade (the
// request, then the preface; the 101 response).
func upgradeSkip(segs []l7test.Segment) (int, int) {
	var c, s []byte
	for _, x := range segs {
		if x.FromClient {
			c = append(c, x.Data...)
		} else {
			s = append(s, x.Data...)
		}
	}
	return bytes.Index(c, []byte(Preface)) + len(Preface), bytes.Index(s, []byte("\r\n\r\n")) + 4
}
