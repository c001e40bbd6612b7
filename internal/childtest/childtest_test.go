package childtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const modeEnv = "GALAGO_CHILDTEST_MODE"

// TestMain is also the helper the tests start, in the mode modeEnv names:
// echo says "ready" and answers each line with itself, exiting 0 at the
// end of stdin; noisy says two other lines first; fd3 says "set up" and
// closes fd 3 instead of saying "ready"; fail exits 3 at the end of stdin;
// hang prints "started" and ignores stdin.
func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "":
		os.Exit(m.Run())
	case "noisy":
		fmt.Println("=== RUN   TestX")
		fmt.Println("not ready")
		fallthrough
	case "echo", "fd3":
		if os.Getenv(modeEnv) == "fd3" {
			fmt.Println("set up")
			os.NewFile(3, "ready").Close()
		} else {
			fmt.Println("ready")
		}
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Println(in.Text())
		}
		os.Exit(0)
	case "fail":
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(3)
	case "hang":
		fmt.Println("started")
		time.Sleep(time.Hour)
	}
	os.Exit(2)
}

func helper(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), modeEnv+"="+mode)
	return cmd
}

// TestChild: lines in order, written lines and bytes answered, Await
// past other lines, the exit status.
func TestChild(t *testing.T) {
	c := Start(t, helper("echo"), CleanExit())
	c.Expect(t, "ready")
	c.Send(t, "one")
	c.Write(t, []byte("two\nthree\n"))
	for _, want := range []string{"one", "two", "three"} {
		c.Expect(t, want)
	}
	c.Exit(t)
	if !c.Cmd.ProcessState.Exited() || c.Pid() != c.Cmd.ProcessState.Pid() {
		t.Errorf("state %v, pid %d", c.Cmd.ProcessState, c.Pid())
	}

	n := Start(t, helper("noisy"))
	n.Await(t, "ready")
	n.Send(t, "after")
	n.Expect(t, "after")

	r := Start(t, helper("fd3"), ReadyFD())
	r.Send(t, "after")
	r.Expect(t, "set up")
	r.Expect(t, "after")
}

// TestFailures: each way a child goes wrong fails the test with a message
// naming the child and what it printed, within the timeout, and the
// cleanup reaps it.
func TestFailures(t *testing.T) {
	// d also bounds the child's start: a race-built test binary started
	// under CI's parallel packages took over 100 ms to read "x" and exit
	// (the "ended" case saw the timeout, not the EOF).
	const d = time.Second
	for _, tc := range []struct {
		name, mode string
		opts       []Option
		stdout     io.Writer
		do         func(tb testing.TB, c *Child)
		want       string
	}{
		{"no line", "hang", nil, nil, func(tb testing.TB, c *Child) { c.Expect(tb, "started"); c.Line(tb) },
			`hang: no line within 1s; it printed ["started"]`},
		{"other line", "echo", nil, nil, func(tb testing.TB, c *Child) { c.Expect(tb, "go") },
			`echo said "ready", want "go"`},
		{"await", "hang", nil, nil, func(tb testing.TB, c *Child) { c.Await(tb, "ready") },
			`hang: waiting for "ready": no line within 1s; it printed ["started"]`},
		{"ended", "fail", nil, nil, func(tb testing.TB, c *Child) { c.Send(tb, "x"); c.Line(tb) },
			`fail: its output ended (EOF); it printed []`},
		{"exit status", "fail", nil, nil, func(tb testing.TB, c *Child) { c.Exit(tb) },
			`fail: exit status 3`},
		{"fd 3 open", "hang", []Option{ReadyFD()}, nil, func(testing.TB, *Child) {},
			`hang: fd 3 still open after 1s`},
		{"no exit", "hang", nil, nil, func(tb testing.TB, c *Child) { _ = c.Wait(tb) },
			`hang did not exit within 1s of its stdin closing: killed`},
		{"unclean at cleanup", "fail", []Option{CleanExit()}, nil, func(testing.TB, *Child) {},
			`fail: exit status 3`},
		{"stdout not read", "echo", nil, io.Discard, func(tb testing.TB, c *Child) { c.Line(tb) },
			`echo: its stdout is not read (cmd.Stdout was set)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTB{}
			start := time.Now()
			f.run(func() {
				cmd := helper(tc.mode)
				cmd.Stdout = tc.stdout
				c := Start(f, cmd, append([]Option{Name(tc.mode), WithTimeout(d)}, tc.opts...)...)
				tc.do(f, c)
			})
			f.cleanup()
			if !strings.Contains(f.failures(), tc.want) {
				t.Errorf("failures %q, want %q", f.failures(), tc.want)
			}
			if el := time.Since(start); el > 10*d {
				t.Errorf("took %v", el)
			}
		})
	}
}

// TestKill: a child that ignores its stdin is killed at cleanup, without
// a failure.
func TestKill(t *testing.T) {
	f := &fakeTB{}
	var c *Child
	f.run(func() {
		c = Start(f, helper("hang"), Kill(), WithTimeout(5*time.Second))
		c.Expect(f, "started")
	})
	start := time.Now()
	f.cleanup()
	if f.failures() != "" || c.Cmd.ProcessState == nil || time.Since(start) > time.Second {
		t.Errorf("failures %q, state %v after %v", f.failures(), c.Cmd.ProcessState, time.Since(start))
	}
}

// fakeTB keeps the failures and the cleanups of the calls run runs.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// run calls fn on a goroutine of its own, as testing does, so that Fatalf
// ends only fn.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.run(f.cleanups[i])
	}
}

func (f *fakeTB) failures() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}
