package flamegraph

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/hotspot/hotspottest"
	"github.com/galago-project/galago/internal/probe/probetest"
)

// javaHot is the JIT-compiled method of testdata/Burner.java as the
// flame graph names it.
const javaHot = "Burner.spinHot(long)"

// TestOnCPUJavaPrivileged: a JVM in a container of its own (pid and mount
// namespaces, its own /tmp) spinning in Burner.spinHot (JIT-compiled, not
// inlined, run with -XX:+PreserveFramePointer) is asked for its perf map over the
// attach protocol, and once the map is loaded most oncpu samples of the
// process are attributed to spinHot by name (the live profile). With
// native_stack 0 (the default) its stacks hold Java frames only (no
// launcher, libjvm or kernel frame); switched to 1, the whole stack from
// the launcher's JavaMain.
func TestOnCPUJavaPrivileged(t *testing.T) {
	probetest.RequireTools(t, "javac", "java", "unshare", "mount")
	dir := hotspottest.Javac(t, "testdata/Burner.java")
	// In a container: the attach socket and the perf map are reached
	// through /proc/<pid>/root, named by the JVM's pid there (1).
	tg := startTargetCmd(t, hotspottest.ContainerCommand(context.Background(), dir,
		"exec java -XX:+PreserveFramePointer -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,Burner::spinHot -XX:+UseSerialGC -Xmx64m -cp /proc/self/cwd Burner"))
	t.Cleanup(func() { _ = tg.Cmd.Process.Kill() }) // unshare --kill-child: the JVM and its /tmp go too
	pid := hotspottest.ContainerJVM(t, tg.Pid())

	var p *Probe
	var javaOnly, whole map[string]uint64
	hub := NewHub()
	begin := time.Now()
	_, flameDir, _ := profiledWith(t, []string{"oncpu"}, pid, 10, func() {
		// The first unnamed frame asks for the map; the samples drained
		// before it arrives stay [unknown]. (30 s: on a loaded machine
		// the JVM gets little CPU to answer.)
		deadline := time.Now().Add(30 * time.Second)
		for !p.jit.loaded(pid) {
			if time.Now().After(deadline) {
				t.Fatal("no perf map loaded within 30 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("perf map loaded %v after the probe started", time.Since(begin))
		// From then on, the live profile (GET /flamegraph/pprof's
		// source) until it holds 60 samples of the process.
		javaOnly = subscribe(t, hub, pid, 60, 20*time.Second)
		p.mu.Lock()
		cfg := p.cfg
		p.mu.Unlock()
		cfg.Params.NativeStack = 1
		if err := p.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		whole = subscribe(t, hub, pid, 60, 20*time.Second)
	}, WithHub(hub), func(q *Probe) { p = q })

	for _, c := range []struct {
		native int
		live   map[string]uint64
	}{{0, javaOnly}, {1, whole}} {
		var hot, total, under uint64
		for stack, n := range c.live {
			total += n
			frames := strings.Split(stack, ";")
			i := indexOf(frames, javaHot)
			if i >= 0 {
				hot += n
			}
			switch c.native {
			case 0:
				for _, f := range frames {
					if f == "JavaMain" || strings.HasSuffix(f, "_[k]") || strings.Contains(f, "libjvm") {
						t.Errorf("native_stack 0: native frame %q in %q", f, stack)
					}
				}
			case 1:
				// Frame pointers kept: the whole stack, from the
				// launcher's native JavaMain through the call stub and
				// Burner.main (interpreted, so "Interpreter", or
				// compiled) to the JIT frame.
				if i > 0 && indexOf(frames[:i], "JavaMain") >= 0 &&
					(frames[i-1] == "Interpreter" || strings.HasPrefix(frames[i-1], "Burner.main(")) {
					under += n
				}
			}
		}
		if float64(hot)/float64(total) < 0.5 {
			t.Fatalf("native_stack %d: %s in %d of %d samples after the map was loaded, want most:\n%v", c.native, javaHot, hot, total, c.live)
		}
		var top string
		for stack, n := range c.live {
			if n > c.live[top] {
				top = stack
			}
		}
		t.Logf("native_stack %d: %s in %d of %d samples after the map was loaded; heaviest stack %q", c.native, javaHot, hot, total, top)
		if c.native == 1 && under*10 < hot*9 {
			t.Errorf("native_stack 1: %s under JavaMain and Burner.main in %d of its %d samples:\n%v", javaHot, under, hot, c.live)
		}
	}

	// The window's folded file: spinHot by name.
	lines := readFoldedFile(t, flameDir, onCPU, pid)
	if hot, _ := weight(lines, javaHot); hot == 0 {
		t.Fatalf("no %s in the folded stacks:\n%v", javaHot, lines)
	}
}

// subscribe collects the oncpu stacks hub receives for pid until they
// hold n samples, at most for d.
func subscribe(t *testing.T, hub *Hub, pid int, n uint64, d time.Duration) map[string]uint64 {
	t.Helper()
	s := &subscription{k: onCPU, procs: map[int]*procProfile{}}
	hub.mu.Lock()
	hub.subs[s] = struct{}{}
	hub.mu.Unlock()
	defer func() {
		hub.mu.Lock()
		delete(hub.subs, s)
		hub.mu.Unlock()
	}()
	deadline := time.Now().Add(d)
	for {
		hub.mu.Lock()
		out := map[string]uint64{}
		var sum uint64
		if pp := s.procs[pid]; pp != nil {
			for k, v := range pp.stacks {
				out[k] = v
				sum += v
			}
		}
		hub.mu.Unlock()
		if sum >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples of pid %d in %v, want %d", sum, pid, d, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func indexOf(frames []string, f string) int {
	for i, g := range frames {
		if g == f {
			return i
		}
	}
	return -1
}
