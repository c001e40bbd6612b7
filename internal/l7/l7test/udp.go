package l7test

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// UDPRecorder is a loopback UDP proxy in front of a real server that
// records every datagram as a segment: a datagram-oriented parser gets one
// chunk per datagram, as the capture of a UDP socket delivers them. Each
// client address gets its own upstream socket, so the server's answers
// find their way back, and its own segment list (see Conns).
type UDPRecorder struct {
	pc       net.PacketConn
	upstream *net.UDPAddr

	mu       sync.Mutex
	segs     []Segment
	sessions map[string]*udpSession
	order    []*udpSession
	wg       sync.WaitGroup
	done     chan struct{}
}

type udpSession struct {
	client net.Addr
	up     *net.UDPConn
	segs   []Segment
}

// RecordUDP starts a UDP proxy to upstream (host:port) on 127.0.0.1:0;
// point the client at Addr.
func RecordUDP(tb testing.TB, upstream string) *UDPRecorder {
	tb.Helper()
	ua, err := net.ResolveUDPAddr("udp", upstream)
	if err != nil {
		tb.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &UDPRecorder{pc: pc, upstream: ua, sessions: map[string]*udpSession{}, done: make(chan struct{})}
	r.wg.Add(1)
	go r.serve()
	tb.Cleanup(func() { r.stop() })
	return r
}

// Addr is the proxy's address.
func (r *UDPRecorder) Addr() string { return r.pc.LocalAddr().String() }

func (r *UDPRecorder) serve() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		s := r.sessions[from.String()]
		if s == nil {
			up, err := net.DialUDP("udp", nil, r.upstream)
			if err != nil {
				r.mu.Unlock()
				continue
			}
			s = &udpSession{client: from, up: up}
			r.sessions[from.String()] = s
			r.order = append(r.order, s)
			r.wg.Add(1)
			go r.answer(s)
		}
		seg := Segment{FromClient: true, Data: bytes.Clone(buf[:n])}
		r.segs = append(r.segs, seg)
		s.segs = append(s.segs, seg)
		r.mu.Unlock()
		_, _ = s.up.Write(buf[:n])
	}
}

func (r *UDPRecorder) answer(s *udpSession) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.up.Read(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		seg := Segment{FromClient: false, Data: bytes.Clone(buf[:n])}
		r.segs = append(r.segs, seg)
		s.segs = append(s.segs, seg)
		r.mu.Unlock()
		_, _ = r.pc.WriteTo(buf[:n], s.client)
	}
}

func (r *UDPRecorder) stop() {
	select {
	case <-r.done:
		return
	default:
		close(r.done)
	}
	r.pc.Close()
	r.mu.Lock()
	for _, s := range r.order {
		s.up.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// Segments stops the proxy and returns every datagram in the order the
// proxy saw them. Call it once the client has had its answers: a datagram
// still in flight is lost.
func (r *UDPRecorder) Segments() []Segment {
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.segs
}

// Connections is Segments split by client address (one client socket each), in
// the order the clients first spoke.
func (r *UDPRecorder) Connections() [][]Segment {
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]Segment, len(r.order))
	for i, s := range r.order {
		out[i] = s.segs
	}
	return out
}
