package tcp

// The test binary doubles as the traffic generator: TestMain runs a helper
// instead of the tests when GALAGO_TCP_HELPER is set, so client and server
// are separate processes (separate tgids) the test starts inside its network
// namespaces with `ip netns exec`.
//
// Helper commands (one per line on stdin): "info" prints the socket's
// tcp_info as JSON, "close" closes it gracefully, "abort" closes it with
// SO_LINGER 0 (a reset); the helper exits after close/abort.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type tcpInfo struct {
	BytesAcked, BytesReceived uint64
	SegsIn, SegsOut           uint32
	TotalRetrans              uint32
	TotalRto                  uint16 // tcpi_total_rto (6.7+; x/sys has the field)
	Pid                       int
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("GALAGO_TCP_HELPER"); mode != "" {
		if err := runHelper(mode, os.Args[len(os.Args)-3:]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper: args are address, bytes to send, bytes to receive.
func runHelper(mode string, args []string) error {
	addr := args[0]
	send, _ := strconv.Atoi(args[1])
	recv, _ := strconv.Atoi(args[2])
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) { fmt.Fprintln(out, s); out.Flush() }
	var c *net.TCPConn
	switch mode {
	case "server", "short-server":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		say("ready")
		cc, err := ln.Accept()
		if err != nil {
			return err
		}
		defer ln.Close() // a live server keeps listening (role inference of pre-existing sockets)
		c = cc.(*net.TCPConn)
		if mode == "short-server" {
			n, err := io.Copy(io.Discard, c)
			if err != nil {
				return err
			}
			say(strconv.FormatInt(n, 10))
			return c.Close()
		}
		if _, err := io.CopyN(io.Discard, c, int64(recv)); err != nil {
			return err
		}
		if _, err := c.Write(make([]byte, send)); err != nil {
			return err
		}
	case "client", "short-client":
		cc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			say("dial: " + err.Error())
			return nil // refused: the test expects it in the reset case
		}
		c = cc.(*net.TCPConn)
		if _, err := c.Write(make([]byte, send)); err != nil {
			return err
		}
		if mode == "short-client" {
			return c.Close()
		}
		if _, err := io.CopyN(io.Discard, c, int64(recv)); err != nil {
			return err
		}
	case "hold-server":
		return holdServer(addr, recv, say)
	case "delay-client":
		return delayClient(addr, send, recv, say)
	case "once-server", "once-client":
		return runOnce(mode == "once-server", addr, send, recv, say)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	say("done")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "info":
			ti, err := tcpInfoOf(c)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(ti)
			say(string(b))
		case "close":
			return c.Close()
		case "abort":
			if err := c.SetLinger(0); err != nil {
				return err
			}
			return c.Close()
		}
	}
	return nil
}

// runOnce is one self-driven request/response connection, closed the way
// GALAGO_TCP_CLOSE says, with no pause for the test: the whole connection
// fits in a report period. The client sends send bytes, the server reads
// recv, holds GALAGO_TCP_HOLD_MS (so a sample can see the connection) and
// answers send bytes, which the client reads (recv). Close modes:
//
//	client      client closes first, server closes on EOF
//	server      server closes first, client closes on EOF
//	client-rst  client aborts (SO_LINGER 0) once its data is acked
//	server-rst  server aborts once its data is acked
//
// The helper prints one line: its tcp_info as JSON, taken when its socket
// is final (the side that receives a reset: after the reset; the others
// just before closing, their data all acked), then exits.
func runOnce(server bool, addr string, send, recv int, say func(string)) error {
	closeMode := os.Getenv("GALAGO_TCP_CLOSE")
	hold, _ := strconv.Atoi(os.Getenv("GALAGO_TCP_HOLD_MS"))
	var c *net.TCPConn
	if server {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		say("ready")
		cc, err := ln.Accept()
		if err != nil {
			return err
		}
		c = cc.(*net.TCPConn)
		if _, err := io.CopyN(io.Discard, c, int64(recv)); err != nil {
			return err
		}
		time.Sleep(time.Duration(hold) * time.Millisecond)
		if _, err := c.Write(make([]byte, send)); err != nil {
			return err
		}
	} else {
		cc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		c = cc.(*net.TCPConn)
		if _, err := c.Write(make([]byte, send)); err != nil {
			return err
		}
		if _, err := io.CopyN(io.Discard, c, int64(recv)); err != nil {
			return err
		}
	}
	me, peer := "client", "server"
	if server {
		me, peer = "server", "client"
	}
	report := func() error {
		ti, err := tcpInfoOf(c)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(ti)
		say(string(b))
		return nil
	}
	switch closeMode {
	case me: // closes first: all its data was acked by the peer's answer or read
		if err := waitAcked(c); err != nil {
			return err
		}
		if err := report(); err != nil {
			return err
		}
		return c.Close()
	case peer, peer + "-rst": // waits for the peer's FIN or reset
		_, err := io.Copy(io.Discard, c)
		if closeMode == peer && err != nil {
			return err
		}
		if err := report(); err != nil {
			return err
		}
		return c.Close()
	case me + "-rst":
		if err := waitAcked(c); err != nil {
			return err
		}
		if err := report(); err != nil {
			return err
		}
		if err := c.SetLinger(0); err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("unknown GALAGO_TCP_CLOSE %q", closeMode)
}

func tcpInfoOf(c *net.TCPConn) (tcpInfo, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return tcpInfo{}, err
	}
	var ti *unix.TCPInfo
	var gerr error
	if err := raw.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return tcpInfo{}, err
	}
	if gerr != nil {
		return tcpInfo{}, gerr
	}
	return tcpInfo{ti.Bytes_acked, ti.Bytes_received, ti.Segs_in, ti.Segs_out, ti.Total_retrans, ti.Total_rto, os.Getpid()}, nil
}

// waitAcked waits (bounded) until the peer acknowledged everything sent,
// so that the counters the helper reports are final.
func waitAcked(c *net.TCPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	for range 200 {
		var ti *unix.TCPInfo
		var gerr error
		if err := raw.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
			return err
		}
		if gerr != nil {
			return gerr
		}
		if ti.Unacked == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("data still unacknowledged after 2s")
}

// holdServer accepts n connections, says "held" and keeps them until stdin
// closes (the benchmark's many concurrent connections).
func holdServer(addr string, n int, say func(string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	say(ln.Addr().String())
	held := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		held = append(held, c)
	}
	say("held")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// delayClient makes n writes of size bytes, each after the previous one was
// fully acknowledged, and prints the time from each write's return until
// its last byte was acknowledged as the helper sees it (tcpi_bytes_acked,
// polled every 100 µs), as a JSON array of nanoseconds; then closes.
func delayClient(addr string, size, n int, say func(string)) error {
	cc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	c := cc.(*net.TCPConn)
	defer c.Close()
	// A send buffer larger than a write: write returns once the data is
	// queued, it does not wait for acknowledgements.
	if err := c.SetWriteBuffer(4 << 20); err != nil {
		return err
	}
	buf := make([]byte, size)
	var seen []int64
	for range n {
		before, err := tcpInfoOf(c)
		if err != nil {
			return err
		}
		if _, err := c.Write(buf); err != nil {
			return err
		}
		t0 := time.Now()
		for {
			ti, err := tcpInfoOf(c)
			if err != nil {
				return err
			}
			if ti.BytesAcked >= before.BytesAcked+uint64(size) {
				break
			}
			if time.Since(t0) > 10*time.Second {
				return errors.New("write not acknowledged within 10s")
			}
			time.Sleep(100 * time.Microsecond)
		}
		seen = append(seen, time.Since(t0).Nanoseconds())
	}
	b, _ := json.Marshal(seen)
	say(string(b))
	return nil
}
