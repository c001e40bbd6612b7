package crpc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// No CRPC implementation is public (it is China CITIC Bank's in-house RPC
// framework, com.citicbank.crpc), so the fixture cannot come from real
// software. It is the next best: a client and a server written here that
// build every frame byte by byte from the layout gala-gopher documents
// (tech header and business header), exchange them over real loopback
// sockets, and are recorded through l7test.Record like every other
// protocol's fixtures. Bodies are opaque bytes: their serialization
// (Hessian, XML or JSON) is not documented and the parser does not read
// them.
//
//	GALAGO_L7_RECORD=1 go test -run TestRecord ./internal/l7/crpc/

// frame builds a CRPC message: the 32-byte tech header, the 71 bytes of
// the business header gala-gopher documents, then body.
func frame(request, heartbeat bool, fmtCode byte, id string, body []byte) []byte {
	b := []byte{flag1, flag2, 0, 0, 0, 0, 0, 0, 1}
	prop := fmtCode << 2
	if request {
		prop |= rqFlag
	}
	if heartbeat {
		prop |= hbFlag
	}
	b = append(b, prop, 0, 0)
	var rid [16]byte
	copy(rid[:], id)
	b = append(b, rid[:]...)
	b = binary.BigEndian.AppendUint32(b, 30000) // timeout, ms
	b = append(b, "NCIM"...)                    // intorSystCod
	var jnl [36]byte
	copy(jnl[:], "NCIM2134223526758"+id[len(id)-1:])
	b = append(b, jnl[:]...)                       // intorTranJnalNum
	b = append(b, "2024-11-23 18:40:00.123456"...) // aplySystTmtp, 26 bytes
	b = append(b, "CBPD"...)                       // sendSystCod
	b = append(b, 0)                               // hbCount
	binary.BigEndian.PutUint16(b[6:], uint16(len(b)-headLenOffset))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[2:], uint32(len(b)-msgLenOffset))
	return b
}

func TestRecord(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record the fixture")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// the server answers every call and heartbeat with the same request
	// id, except a call with id "unanswered"; calls read together are
	// answered in reverse order (the connection multiplexes)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var batch [][]byte
		for {
			var h [28]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			hd, ok := parseHeader(h[:])
			if !ok {
				t.Error("server: bad header")
				return
			}
			if _, err := io.CopyN(io.Discard, c, int64(hd.total-28)); err != nil {
				return
			}
			id := string(bytes.TrimRight(hd.id[:], "\x00"))
			if id == "unanswered" {
				continue
			}
			body := []byte("opaque body: serialized result of " + id)
			batch = append(batch, frame(false, hd.heartbeat, 0, id, body))
			if strings.HasPrefix(id, "pipe") && id != "pipe-4" {
				continue // answer the pipelined calls together, last first
			}
			for i := len(batch) - 1; i >= 0; i-- {
				if _, err := c.Write(batch[i]); err != nil {
					return
				}
			}
			batch = batch[:0]
		}
	}()
	rec := l7test.Record(t, ln.Addr().String())
	c, err := net.Dial("tcp", rec.Addr())
	if err != nil {
		t.Fatal(err)
	}
	read := func() {
		var h [28]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			t.Fatal(err)
		}
		hd, _ := parseHeader(h[:])
		if _, err := io.CopyN(io.Discard, c, int64(hd.total-28)); err != nil {
			t.Fatal(err)
		}
	}
	call := func(id string, body []byte) { _, _ = c.Write(frame(true, false, 0, id, body)) }
	for i := range 3 {
		call(fmt.Sprintf("call-%d", i), []byte(fmt.Sprintf("opaque body: serialized call %d", i)))
		read()
	}
	_, _ = c.Write(frame(true, true, 0, "hb-1", nil))
	read()
	var pipe []byte
	for i := 1; i <= 4; i++ {
		pipe = append(pipe, frame(true, false, 2, fmt.Sprintf("pipe-%d", i), []byte(`{"opaque":"json body"}`))...)
	}
	_, _ = c.Write(pipe)
	for range 4 {
		read()
	}
	call("big", bytes.Repeat([]byte("opaque body: a large serialized argument. "), 5000))
	read()
	call("unanswered", []byte("opaque body: a call the server never answers"))
	c.Close()
	segs := rec.Segments()
	f, err := os.Create("testdata/synthetic.chunks")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := l7test.Write(f, "SYNTHETIC: no CRPC software is public. Frames built by record_test.go from gala-gopher's documented\n"+
		"header layout (l7probe include/l7.h, __get_crpc_type), exchanged by a test client and server over loopback\n"+
		"and recorded through l7test.Record: 3 calls, 1 heartbeat, 4 pipelined JSON-format calls answered in reverse\n"+
		"order, 1 call with a 210 KB body, 1 call never answered. Bodies are opaque bytes.", segs); err != nil {
		t.Fatal(err)
	}
}
