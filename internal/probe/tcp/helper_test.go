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
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type tcpInfo struct {
	BytesAcked, BytesReceived uint64
	SegsIn, SegsOut           uint32
	TotalRetrans              uint32
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
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	say("done")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "info":
			raw, err := c.SyscallConn()
			if err != nil {
				return err
			}
			var ti *unix.TCPInfo
			var gerr error
			if err := raw.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
				return err
			}
			if gerr != nil {
				return gerr
			}
			b, _ := json.Marshal(tcpInfo{ti.Bytes_acked, ti.Bytes_received, ti.Segs_in, ti.Segs_out, ti.Total_retrans, os.Getpid()})
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

var _ = syscall.Getpid
