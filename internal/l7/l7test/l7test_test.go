package l7test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7"
)

func TestParseWrite(t *testing.T) {
	segs := []Segment{{true, []byte("PING\r\n")}, {false, []byte("+PONG\r\n")}}
	var b bytes.Buffer
	if err := Write(&b, "two lines\nof comment", segs); err != nil {
		t.Fatal(err)
	}
	got, err := Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].FromClient || string(got[1].Data) != "+PONG\r\n" {
		t.Fatalf("%+v", got)
	}
	for _, bad := range []string{"X 00", "C zz", "C"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestChunksResplitTruncate(t *testing.T) {
	segs := []Segment{{true, []byte("abc")}, {true, []byte("de")}, {false, []byte("xyz")}}
	srv := Chunks(segs, l7.Server, 100, 10)
	if srv[0].Dir != l7.Ingress || srv[2].Dir != l7.Egress || srv[1].TS != 110 {
		t.Fatalf("%+v", srv)
	}
	re := Resplit(srv, 2)
	var s []string
	for _, c := range re {
		s = append(s, string(c.Data))
	}
	if strings.Join(s, "|") != "ab|cd|e|xy|z" || re[1].TS != 100 || re[2].TS != 110 {
		t.Fatalf("%v %+v", s, re)
	}
	tr := Truncate(srv, 2)
	if string(tr[0].Data) != "ab" || tr[0].Size != 3 || string(srv[0].Data) != "abc" {
		t.Fatalf("%+v", tr)
	}
}

func TestRecorder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 4)
		_, _ = io.ReadFull(c, b)
		_, _ = c.Write([]byte("pong"))
		c.Close()
	}()
	r := Record(t, ln.Addr().String())
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("ping"))
	b, _ := io.ReadAll(c)
	c.Close()
	segs := r.Segments()
	if string(b) != "pong" || len(segs) != 2 || !segs[0].FromClient || string(segs[1].Data) != "pong" {
		t.Fatalf("%q %+v", b, segs)
	}
}

func TestRecorderConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1)
				_, _ = io.ReadFull(c, b)
				_, _ = c.Write(bytes.ToUpper(b))
				c.Close()
			}()
		}
	}()
	r := Record(t, ln.Addr().String())
	for _, s := range []string{"a", "b"} {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(s))
		_, _ = io.ReadAll(c)
		c.Close()
	}
	conns := r.Connections()
	if len(conns) != 2 || len(conns[0]) != 2 || string(conns[0][0].Data) != "a" || string(conns[0][1].Data) != "A" ||
		len(conns[1]) != 2 || string(conns[1][0].Data) != "b" || string(conns[1][1].Data) != "B" {
		t.Fatalf("%+v", conns)
	}
}

func TestUDPRecorder(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		b := make([]byte, 100)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(bytes.ToUpper(b[:n]), from)
		}
	}()
	r := RecordUDP(t, pc.LocalAddr().String())
	var got []string
	for _, m := range []string{"one", "two"} {
		c, err := net.Dial("udp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{m, m + "!"} {
			_, _ = c.Write([]byte(d))
			b := make([]byte, 100)
			n, err := c.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(b[:n]))
		}
		c.Close()
	}
	conns := r.Connections()
	segs := r.Segments()
	if strings.Join(got, ",") != "ONE,ONE!,TWO,TWO!" || len(segs) != 8 || len(conns) != 2 || len(conns[1]) != 4 ||
		!conns[1][2].FromClient || string(conns[1][2].Data) != "two!" || conns[1][3].FromClient || string(conns[1][3].Data) != "TWO!" {
		t.Fatalf("%v %+v %+v", got, segs, conns)
	}
}

func TestFuzzChunks(t *testing.T) {
	chunks, req := FuzzChunks([]byte("abcdefgh"), []byte{0x02, 0x40 | 0x80 | 0x03}, l7.Client)
	want := []l7.Chunk{
		{Dir: l7.Egress, TS: 1, Data: []byte("abc"), Size: 3},
		{Dir: l7.Ingress, TS: 2, Data: []byte("de"), Size: 4},
		{Dir: l7.Egress, TS: 3, Data: []byte("h"), Size: 1},
	}
	if req != 4 || len(chunks) != 3 {
		t.Fatalf("%d request bytes, %+v", req, chunks)
	}
	for i, c := range chunks {
		if c.Dir != want[i].Dir || c.TS != want[i].TS || string(c.Data) != string(want[i].Data) || c.Size != want[i].Size {
			t.Errorf("chunk %d: %+v, want %+v", i, c, want[i])
		}
	}
}
func TestFuzzEncoding(t *testing.T) {
	segs := []Segment{{true, []byte("request")}, {false, []byte("response")}}
	role, chunks := FuzzConversation(FuzzInput(segs, l7.Server, 2))
	if role != l7.Server || len(chunks) != 2 {
		t.Fatalf("%v %+v", role, chunks)
	}
	if c := chunks[0]; c.Dir != l7.Ingress || string(c.Data) != "reque" || c.Size != 7 || c.TS != 100 {
		t.Errorf("request chunk %+v", c)
	}
	if c := chunks[1]; c.Dir != l7.Egress || string(c.Data) != "respo" || c.Size != 8 || c.TS != 110 {
		t.Errorf("response chunk %+v", c)
	}
	if _, chunks := FuzzConversation([]byte{0, 1, 0xff, 0xff, 'x'}); len(chunks) != 1 || len(chunks[0].Data) != 1 {
		t.Errorf("a length past the input: %+v", chunks)
	}
}

func TestDiff(t *testing.T) {
	a := []l7.Exchange{{HasRequest: true, Start: 1, API: "GET"}}
	b := []l7.Exchange{{HasRequest: true, Start: 2, API: "GET"}}
	if Diff(a, a, true) != "" || Diff(a, b, false) != "" || Diff(a, b, true) == "" || Diff(a, nil, false) == "" {
		t.Error("Diff")
	}
}

func TestWriteFixtureAndSeeds(t *testing.T) {
	dir := t.TempDir()
	segs := []Segment{{true, []byte("ping")}, {false, []byte("pong")}}
	WriteFixture(t, filepath.Join(dir, "x.chunks"), "recorded by a test", segs)
	if got := Load(t, filepath.Join(dir, "x.chunks")); len(got) != 2 || string(got[1].Data) != "pong" || got[1].FromClient {
		t.Fatalf("%+v", got)
	}
	WriteFuzzSeeds(t, filepath.Join(dir, "fuzz"), "x", segs)
	b, err := os.ReadFile(filepath.Join(dir, "fuzz", "x-server-64"))
	if err != nil {
		t.Fatal(err)
	}
	var seed string
	if _, err := fmt.Sscanf(strings.TrimPrefix(string(b), "go test fuzz v1\n[]byte("), "%q", &seed); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	if role, chunks := FuzzConversation([]byte(seed)); role != l7.Server || len(chunks) != 2 || chunks[0].Dir != l7.Ingress {
		t.Errorf("seed decodes to %v %+v", role, chunks)
	}
	if CPUTime() <= 0 {
		t.Error("no CPU time")
	}
}
