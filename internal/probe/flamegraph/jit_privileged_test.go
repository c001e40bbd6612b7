package flamegraph

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
)

// javaHot is the JIT-compiled method of testdata/Burner.java as the
// flame graph names it.
const javaHot = "Burner.spinHot(long)"

// TestOnCPUJavaPrivileged: a JVM spinning in Burner.spinHot (JIT-compiled,
// run with -XX:+PreserveFramePointer) is asked for its perf map over the
// attach protocol, and once the map is loaded the oncpu samples of the
// process are attributed to spinHot by name, under the whole Java stack.
func TestOnCPUJavaPrivileged(t *testing.T) {
	probetest.RequireTools(t, "javac", "java")
	dir := t.TempDir()
	start := time.Now()
	if out, err := exec.Command("javac", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-d", dir, "testdata/Burner.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	t.Logf("javac %v", time.Since(start))
	tg := startTargetCmd(t, exec.Command("java", "-XX:+PreserveFramePointer", "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Burner::spinHot", "-XX:+UseSerialGC", "-Xmx64m", "-cp", dir, "Burner"))
	t.Cleanup(func() { _ = tg.cmd.Process.Kill() })
	pid := tg.cmd.Process.Pid

	var p *Probe
	var loadedAt time.Duration
	begin := time.Now()
	_, flameDir, _ := profiledWith(t, []string{"oncpu"}, pid, 10, func() {
		// The first unnamed frame asks for the map; the samples drained
		// before it arrives stay [unknown].
		deadline := time.Now().Add(10 * time.Second)
		for !p.jit.loaded(pid) {
			if time.Now().After(deadline) {
				t.Fatal("no perf map loaded within 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		loadedAt = time.Since(begin)
		time.Sleep(2500 * time.Millisecond)
	}, func(q *Probe) { p = q })
	t.Logf("perf map loaded %v after the probe started", loadedAt)

	lines := readFoldedFile(t, flameDir, onCPU, pid)
	hot, total := weight(lines, javaHot)
	// The samples before the map arrived (loadedAt of the window) and
	// the JVM's own threads (compiler, GC) are the rest.
	if total == 0 || float64(hot)/float64(total) < 0.5 {
		t.Fatalf("%s in %d of %d samples, want most:\n%v", javaHot, hot, total, lines)
	}
	t.Logf("%s in %d of %d samples", javaHot, hot, total)
	// Frame pointers kept: the whole stack, from the launcher's native
	// JavaMain through the call stub and Burner.main (interpreted, so
	// "Interpreter", or compiled) to the JIT frame.
	var whole uint64
	for _, l := range lines {
		i := indexOf(l.frames, javaHot)
		if i > 0 && indexOf(l.frames[:i], "JavaMain") >= 0 &&
			(l.frames[i-1] == "Interpreter" || strings.HasPrefix(l.frames[i-1], "Burner.main(")) {
			whole += l.count
		}
	}
	if whole*10 < hot*9 {
		t.Errorf("%s under JavaMain and Burner.main in %d of its %d samples:\n%v", javaHot, whole, hot, lines)
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
