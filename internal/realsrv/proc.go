package realsrv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Procs owns every process the harness starts (servers, agents, load
// generators), so that all of them are stopped at the end of a run, on a
// failure or on Ctrl-C. Each process runs in its own process group: a
// server's workers or an agent started through `sh -c` are stopped with it.
type Procs struct {
	mu     sync.Mutex
	procs  map[*Proc]struct{}
	cgroup *os.File
}

// InCgroup makes every process started from now on begin in the cgroup2
// directory dir (clone3 CLONE_INTO_CGROUP), so its children and threads
// are in it from their first instruction: tests select a run's processes
// by that cgroup. ps keeps dir open; Close releases it.
func (ps *Procs) InCgroup(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	ps.mu.Lock()
	old := ps.cgroup
	ps.cgroup = f
	ps.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Close releases the cgroup directory of InCgroup, if any.
func (ps *Procs) Close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.cgroup != nil {
		ps.cgroup.Close()
		ps.cgroup = nil
	}
}

// prepare sets what every child of ps shares: its own process group,
// SIGKILL when the harness dies, and the cgroup of InCgroup.
func (ps *Procs) prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	// A harness killed with SIGKILL must not leave servers behind.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	ps.mu.Lock()
	if ps.cgroup != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(ps.cgroup.Fd())
	}
	ps.mu.Unlock()
}

// NewProcs returns an empty registry.
func NewProcs() *Procs { return &Procs{procs: map[*Proc]struct{}{}} }

// Proc is one started process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Output collects stdout and stderr (bounded), for error messages.
	Output *tailBuffer
	done   chan struct{}
	err    error
	owner  *Procs
}

// Start starts cmd in a new process group and registers it.
func (ps *Procs) Start(name string, cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Name: name, Cmd: cmd, Output: newTailBuffer(64 << 10), done: make(chan struct{}), owner: ps}
	if cmd.Stdout == nil {
		cmd.Stdout = p.Output
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.Output
	}
	ps.prepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	ps.mu.Lock()
	ps.procs[p] = struct{}{}
	ps.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (and process group id).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Err is the exit error, valid after Exited.
func (p *Proc) Err() error { return p.err }

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the process. Idempotent.
func (p *Proc) Stop(grace time.Duration) error {
	defer func() {
		p.owner.mu.Lock()
		delete(p.owner.procs, p)
		p.owner.mu.Unlock()
	}()
	select {
	case <-p.done:
		// Children left in the group (a shell's background job) go too.
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		return nil
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not exit within %v of SIGTERM: killed", p.Name, grace)
}

// StopAll stops every process still registered, newest first is not
// needed: each is its own group.
func (ps *Procs) StopAll() {
	ps.mu.Lock()
	list := make([]*Proc, 0, len(ps.procs))
	for p := range ps.procs {
		list = append(list, p)
	}
	ps.mu.Unlock()
	for _, p := range list {
		_ = p.Stop(10 * time.Second)
	}
}

// Run runs cmd to completion (bounded by ctx) and returns its combined
// output; a failure names the command and carries the output's tail.
func Run(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	return (*Procs)(nil).Run(ctx, cmd)
}

// Run is the function Run for a process of ps: it starts in the cgroup
// of InCgroup. ps may be nil.
func (ps *Procs) Run(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if ps == nil {
		ps = &Procs{}
	}
	ps.prepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.Bytes(), fmt.Errorf("%s: %w\n%s", cmd.String(), err, Tail(out.Bytes(), 2000))
		}
		return out.Bytes(), nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr := <-done
		return out.Bytes(), fmt.Errorf("%s: %w", cmd.String(), errors.Join(ctx.Err(), werr))
	}
}

func Tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// WaitFor polls cond every 100 ms until it holds, ctx ends or timeout.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %v waiting for %s: %w", timeout, what, last)
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var _ io.Writer = (*tailBuffer)(nil)

// WriteFile writes a file, naming it in the error.
func WriteFile(path, content string, mode os.FileMode) error {
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
