package appinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/procfs"
)

// Read detects the application of process pid on the host under fsys.
// A process that is gone gives an error satisfying errors.Is(err,
// fs.ErrNotExist); an unreadable exe (a kernel thread, or no permission)
// is not an error: the command line still counts.
func Read(fsys procfs.FS, pid int) (App, error) {
	dir := fsys.Path(fmt.Sprintf("/proc/%d", pid))
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return App{}, err
	}
	comm, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return App{}, err
	}
	exe, _ := os.Readlink(dir + "/exe")
	exe = strings.TrimSuffix(exe, " (deleted)")
	in := Input{Exe: exe, Args: splitArgs(cmdline), Comm: strings.TrimSpace(string(comm))}
	if a := Detect(in); a.Type != "" {
		return a, nil
	}
	in.Ports = listenPorts(dir)
	return Detect(in), nil
}

func splitArgs(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// listenPorts are the TCP ports the process's sockets listen on: its fds'
// socket inodes found among the LISTEN rows of its namespace's tcp tables.
// Unreadable parts give fewer ports, never an error.
func listenPorts(dir string) []uint16 {
	listen := map[uint64]uint16{}
	for _, f := range []string{"/net/tcp", "/net/tcp6"} {
		fh, err := os.Open(dir + f)
		if err != nil {
			continue
		}
		for ino, port := range ParseListen(fh) {
			listen[ino] = port
		}
		fh.Close()
	}
	if len(listen) == 0 {
		return nil
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return nil
	}
	var out []uint16
	for _, fd := range fds {
		l, err := os.Readlink(dir + "/fd/" + fd.Name())
		if err != nil {
			continue
		}
		s, ok := strings.CutPrefix(l, "socket:[")
		if !ok {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err != nil {
			continue
		}
		if port, ok := listen[ino]; ok {
			out = append(out, port)
		}
	}
	return out
}

// ParseListen reads a /proc/net/tcp or tcp6 table: the local port of each
// LISTEN (0A) socket, by inode.
func ParseListen(r io.Reader) map[uint64]uint16 {
	out := map[uint64]uint16{}
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" {
			continue
		}
		_, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		out[ino] = uint16(port)
	}
	return out
}
