package opengauss

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the TCP LISTEN state in /proc/net/tcp.
const tcpListen = "0A"

// listenInodes returns the socket inodes of /proc/net/tcp or tcp6 (r)
// that listen on port at addr or at the wildcard address.
func listenInodes(r io.Reader, addr netip.Addr, port int) ([]uint64, error) {
	var out []uint64
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		host, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("bad local address %q", f[1])
		}
		p, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("bad local port %q", f[1])
		}
		if int(p) != port {
			continue
		}
		a, err := procAddr(host)
		if err != nil {
			return nil, err
		}
		if !a.IsUnspecified() && a.Unmap() != addr.Unmap() {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad inode %q", f[9])
		}
		out = append(out, ino)
	}
	return out, sc.Err()
}

// procAddr decodes an address of /proc/net/tcp{,6}: 32-bit words in host
// (little-endian) order.
func procAddr(h string) (netip.Addr, error) {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.Addr{}, fmt.Errorf("bad address %q", h)
	}
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(b[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}

// listener is the process (tgid) that listens on ip:port in the host's
// network namespace, 0 when none does (the server is elsewhere, or in
// another network namespace): the lowest pid holding the socket, the
// server's first process.
func listener(root string, ip string, port int) int {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return 0 // a host name: not resolved here
	}
	want := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		fh, err := os.Open(filepath.Join(root, "proc", "net", f))
		if err != nil {
			continue
		}
		inos, _ := listenInodes(fh, addr, port)
		fh.Close()
		for _, ino := range inos {
			want["socket:["+strconv.FormatUint(ino, 10)+"]"] = true
		}
	}
	if len(want) == 0 {
		return 0
	}
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		return 0
	}
	best := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || (best != 0 && pid > best) {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(root, "proc", e.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(root, "proc", e.Name(), "fd", fd.Name())); err == nil && want[l] {
				best = pid
				break
			}
		}
	}
	return best
}
