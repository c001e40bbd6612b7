// Package childtest runs the helper processes tests drive through their
// standard input and output: a program built for the test, a real tool, or
// the test binary itself re-executed in a helper mode. Start starts one
// with its stdin a pipe and, unless the test set cmd.Stdout, its stdout
// read line by line (with ReadyFD, it returns once the child closed fd 3
// to say it is ready); Line, Expect and Await wait for its lines with a
// timeout and fail the test naming the command and what it printed; Send
// and Write make it act; Wait and Exit reap it. A cleanup closes its stdin
// (or kills it, with Kill) and reaps it, so none outlives its test. Only
// tests import it.
//
// A typical helper prints "ready", then answers each command line:
//
//	c := childtest.Start(t, exec.Command(bin))
//	c.Expect(t, "ready")
//	c.Send(t, "alloc 100")
//	n := c.Line(t)
package childtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Timeout bounds each wait for a line and for an exit unless WithTimeout
// says otherwise. It is a ceiling for a test that is going wrong, not a
// measurement.
const Timeout = 30 * time.Second

// keptLines is how many of the last lines a child printed a failure
// message shows.
const keptLines = 10

// Option configures Start.
type Option func(*config)

type config struct {
	name      string
	kill      bool
	cleanExit bool
	readyFD   bool
	timeout   time.Duration
}

// Name names the child in failure messages instead of its command line
// (for a re-executed test binary, say its helper mode).
func Name(name string) Option { return func(c *config) { c.name = name } }

// Kill makes the cleanup kill the child instead of closing its stdin and
// waiting for it: for a child that does not end on its own.
func Kill() Option { return func(c *config) { c.kill = true } }

// CleanExit makes the cleanup fail the test unless the child, its stdin
// closed, exits with status 0.
func CleanExit() Option { return func(c *config) { c.cleanExit = true } }

// ReadyFD gives the child the write end of a pipe as fd 3 (cmd.ExtraFiles
// follow as 4, ...) and makes Start return once the child has closed it:
// its way to say it is ready without printing, so that everything it does
// from then on is the workload a test measures.
func ReadyFD() Option { return func(c *config) { c.readyFD = true } }

// WithTimeout replaces Timeout for this child.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Child is a running helper process.
type Child struct {
	Cmd   *exec.Cmd
	Stdin io.WriteCloser

	name    string
	timeout time.Duration
	out     *os.File // read end of stdout; nil when the test set cmd.Stdout

	mu      sync.Mutex
	queue   []string // lines not yet taken
	printed []string // the last keptLines lines, for failure messages
	ended   error    // why stdout ended (io.EOF at its end), once it did
	notify  chan struct{}

	waitOnce sync.Once
	exited   chan struct{}
	waitErr  error
}

// Start starts cmd with its stdin a pipe and, when cmd.Stdout is nil, its
// stdout read by lines; it fails t if the command cannot start. At the end
// of the test the child's stdin is closed and the child reaped (killed
// first with Kill; killed after the timeout if it does not exit, which
// fails t).
func Start(t testing.TB, cmd *exec.Cmd, opts ...Option) *Child {
	t.Helper()
	cfg := config{name: cmd.String(), timeout: Timeout}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Child{Cmd: cmd, name: cfg.name, timeout: cfg.timeout, notify: make(chan struct{}, 1), exited: make(chan struct{})}
	var err error
	if c.Stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var outW *os.File
	if cmd.Stdout == nil {
		// A pipe of our own, not StdoutPipe: Wait would close that one,
		// losing lines not read yet.
		if c.out, outW, err = os.Pipe(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cmd.Stdout = outW
	}
	var readyR, readyW *os.File
	if cfg.readyFD {
		if readyR, readyW, err = os.Pipe(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cmd.ExtraFiles = append([]*os.File{readyW}, cmd.ExtraFiles...)
	}
	err = cmd.Start()
	for _, f := range []*os.File{outW, readyW} {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		for _, f := range []*os.File{c.out, readyR} {
			if f != nil {
				f.Close()
			}
		}
		t.Fatalf("start %s: %v", c.name, err)
	}
	if c.out != nil {
		go c.read()
	}
	t.Cleanup(func() {
		if cfg.kill {
			_ = cmd.Process.Kill()
		}
		err := c.wait(t)
		if cfg.cleanExit && !cfg.kill && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.out != nil {
			c.out.Close() // a grandchild may still hold the write end
		}
	})
	if readyR != nil {
		c.awaitClose(t, readyR)
	}
	return c
}

// awaitClose waits until the child has closed its end of the ready pipe.
func (c *Child) awaitClose(t testing.TB, r *os.File) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r) // EOF once the child closed fd 3
		close(closed)
	}()
	defer r.Close()
	select {
	case <-closed:
	case <-time.After(c.timeout):
		c.mu.Lock()
		printed := c.printed
		c.mu.Unlock()
		t.Fatalf("%s: fd 3 still open after %v; it printed %q", c.name, c.timeout, printed)
	}
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.Cmd.Process.Pid }

func (c *Child) read() {
	sc := bufio.NewScanner(c.out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		c.mu.Lock()
		c.queue = append(c.queue, sc.Text())
		c.printed = append(c.printed, sc.Text())
		if len(c.printed) > keptLines {
			c.printed = c.printed[1:]
		}
		c.mu.Unlock()
		c.poke()
	}
	c.mu.Lock()
	c.ended = sc.Err()
	if c.ended == nil {
		c.ended = io.EOF
	}
	c.mu.Unlock()
	c.poke()
}

func (c *Child) poke() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// next takes the next line, waiting until the deadline.
func (c *Child) next(deadline <-chan time.Time) (string, error) {
	if c.out == nil {
		return "", fmt.Errorf("its stdout is not read (cmd.Stdout was set)")
	}
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			l := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return l, nil
		}
		ended, printed := c.ended, c.printed
		c.mu.Unlock()
		if ended != nil {
			return "", fmt.Errorf("its output ended (%w); it printed %q", ended, printed)
		}
		select {
		case <-c.notify:
		case <-deadline:
			return "", fmt.Errorf("no line within %v; it printed %q", c.timeout, printed)
		}
	}
}

// Line returns the next line the child prints; it fails t when none comes
// within the timeout or the output ends.
func (c *Child) Line(t testing.TB) string {
	t.Helper()
	l, err := c.next(time.After(c.timeout))
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return l
}

// Expect takes the next line and fails t unless it is want.
func (c *Child) Expect(t testing.TB, want string) {
	t.Helper()
	if l := c.Line(t); l != want {
		t.Fatalf("%s said %q, want %q", c.name, l, want)
	}
}

// Await takes lines until one is want (a child that prints other things
// first, such as a test binary's -test.v lines); it fails t if none is
// within the timeout.
func (c *Child) Await(t testing.TB, want string) {
	t.Helper()
	deadline := time.After(c.timeout)
	for {
		l, err := c.next(deadline)
		if err != nil {
			t.Fatalf("%s: waiting for %q: %v", c.name, want, err)
		}
		if l == want {
			return
		}
	}
}

// Send writes line and a newline to the child's stdin.
func (c *Child) Send(t testing.TB, line string) {
	t.Helper()
	c.Write(t, []byte(line+"\n"))
}

// Write writes b to the child's stdin.
func (c *Child) Write(t testing.TB, b []byte) {
	t.Helper()
	if _, err := c.Stdin.Write(b); err != nil {
		t.Fatalf("write to %s: %v", c.name, err)
	}
}

// Wait closes the child's stdin and waits for it to exit, and returns
// what exec.Cmd.Wait returned (the ProcessState is in Cmd); the child is
// killed and t fails if it does not exit within the timeout. Later calls
// return the same.
func (c *Child) Wait(t testing.TB) error {
	t.Helper()
	return c.wait(t)
}

// Exit is Wait that fails t unless the child exits with status 0.
func (c *Child) Exit(t testing.TB) {
	t.Helper()
	if err := c.wait(t); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
}

func (c *Child) wait(t testing.TB) error {
	t.Helper()
	c.waitOnce.Do(func() {
		_ = c.Stdin.Close()
		go func() {
			c.waitErr = c.Cmd.Wait()
			close(c.exited)
		}()
	})
	select {
	case <-c.exited:
	case <-time.After(c.timeout):
		_ = c.Cmd.Process.Kill()
		<-c.exited
		t.Errorf("%s did not exit within %v of its stdin closing: killed", c.name, c.timeout)
	}
	return c.waitErr
}
