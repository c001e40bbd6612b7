// Package hotspot speaks to HotSpot JVMs without an agent: their
// hsperfdata counters (ReadPerfData) and the attach protocol (Attacher),
// both reached through /proc/<pid>/root so a JVM in a container is served
// from the host. Shared by the jvm probe (its tables) and the flamegraph
// probe (Compiler.perfmap, for JIT frames).
package hotspot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The HotSpot attach protocol (jdk.attach's VirtualMachineImpl on Linux),
// in Go: the JVM listens on the Unix socket /tmp/.java_pid<nspid> of its
// mount namespace once asked to (a file .attach_pid<nspid> in its working
// directory or /tmp, then SIGQUIT); a client sends "1\0<cmd>\0<arg>\0\0\0"
// (protocol version 1, a command and three arguments) and reads the
// result code on the first line, then the command's output to EOF.
const (
	// maxReply bounds a command's output (a thread dump of thousands of
	// threads is a few MiB).
	maxReply = 32 << 20
	// sigquitMask is SIGQUIT's bit in /proc/<pid>/status SigCgt.
	sigquitMask = 1 << (syscall.SIGQUIT - 1)
)

var (
	// ErrNoAttach: the JVM cannot be attached to without risk (SIGQUIT
	// not caught: -Xrs, or attach disabled), or did not answer.
	ErrNoAttach = errors.New("jvm: attach unavailable")
	// errReplyTooLong: a command's output beyond maxReply.
	errReplyTooLong = errors.New("jvm: attach reply too long")
)

// Attacher reaches one JVM by the attach protocol.
type Attacher struct {
	Proc    string // /proc/<pid> (under the host root)
	PID     int    // in galago's pid namespace
	NSPID   int    // in the JVM's own
	Timeout time.Duration
}

func (a *Attacher) socket() string {
	return filepath.Join(a.Proc, "root", "tmp", ".java_pid"+strconv.Itoa(a.NSPID))
}

// start asks the JVM to start its attach listener, unless it listens
// already: the trigger file, then SIGQUIT, once the JVM is seen catching
// SIGQUIT (a JVM run with -Xrs would die of it). It waits for the socket
// until ctx ends or a.Timeout passes.
func (a *Attacher) start(ctx context.Context) error {
	if isSocket(a.socket()) {
		return nil
	}
	caught, err := catchesSIGQUIT(filepath.Join(a.Proc, "status"))
	if err != nil {
		return err
	}
	if !caught {
		return fmt.Errorf("%w: pid %d does not catch SIGQUIT (-Xrs): not signalled", ErrNoAttach, a.PID)
	}
	name := ".attach_pid" + strconv.Itoa(a.NSPID)
	trigger := filepath.Join(a.Proc, "cwd", name)
	f, err := os.OpenFile(trigger, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		trigger = filepath.Join(a.Proc, "root", "tmp", name)
		if f, err = os.OpenFile(trigger, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return fmt.Errorf("jvm: attach trigger for pid %d: %w", a.PID, err)
		}
	}
	f.Close()
	defer os.Remove(trigger)
	if err := syscall.Kill(a.PID, syscall.SIGQUIT); err != nil {
		if errors.Is(err, syscall.EPERM) {
			// Another user's JVM and no CAP_KILL: so it stays.
			return fmt.Errorf("%w: SIGQUIT to pid %d needs CAP_KILL: %w", ErrNoAttach, a.PID, err)
		}
		return fmt.Errorf("jvm: SIGQUIT to pid %d: %w", a.PID, err)
	}
	deadline := time.NewTimer(a.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !isSocket(a.socket()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w: pid %d did not open %s within %v", ErrNoAttach, a.PID, a.socket(), a.Timeout)
		case <-tick.C:
		}
	}
	return nil
}

// Jcmd runs one diagnostic command (e.g. "GC.heap_info") and returns its
// output.
func (a *Attacher) Jcmd(ctx context.Context, command string) (string, error) {
	if err := a.start(ctx); err != nil {
		return "", err
	}
	d := net.Dialer{Timeout: a.Timeout}
	c, err := d.DialContext(ctx, "unix", a.socket())
	if err != nil {
		return "", fmt.Errorf("jvm: attach to pid %d: %w", a.PID, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(a.Timeout))
	if _, err := c.Write(request("jcmd", command)); err != nil {
		return "", fmt.Errorf("jvm: attach to pid %d: %w", a.PID, err)
	}
	out, err := readReply(c)
	if err != nil {
		return "", fmt.Errorf("jvm: %s on pid %d: %w", command, a.PID, err)
	}
	return out, nil
}

// request is an attach request: version 1, cmd and up to three arguments.
func request(cmd string, args ...string) []byte {
	b := []byte("1\x00" + cmd + "\x00")
	for i := range 3 {
		if i < len(args) {
			b = append(b, args[i]...)
		}
		b = append(b, 0)
	}
	return b
}

// readReply reads a reply: the result code line, then the output; a
// non-zero code is an error carrying the output.
func readReply(r io.Reader) (string, error) {
	br := bufio.NewReader(io.LimitReader(r, maxReply+1))
	line, err := br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reply without a result code: %w", err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return "", fmt.Errorf("result code %q", strings.TrimSpace(line))
	}
	out, err := io.ReadAll(br)
	if err != nil {
		return "", err
	}
	if len(line)+len(out) > maxReply {
		return "", errReplyTooLong
	}
	if code != 0 {
		return "", fmt.Errorf("result %d: %s", code, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func isSocket(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

// catchesSIGQUIT reads SigCgt of a /proc/<pid>/status file.
func catchesSIGQUIT(status string) (bool, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, fmt.Errorf("%s: SigCgt %q", status, v)
			}
			return m&sigquitMask != 0, nil
		}
	}
	return false, fmt.Errorf("%s: no SigCgt", status)
}
