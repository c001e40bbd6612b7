package appinfo

// Privileged tier: real servers from Debian packages (nginx, redis-server,
// memcached, postgresql; `make test` installs them) and real java and
// python programs, started here; every process of each, found
// independently with `ss -ltnp` and its children, must be named. Runs when
// GALAGO_PRIVILEGED_TESTS=1 (CI always sets it).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/realsrv"
)

var ssPid = regexp.MustCompile(`pid=(\d+)`)

// listeners are the pids that hold the socket listening on TCP port, as
// ss sees them.
func listeners(t *testing.T, port int) []int {
	t.Helper()
	out, err := exec.Command("ss", "-Hltnp", fmt.Sprintf("sport = :%d", port)).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	var pids []int
	for _, m := range ssPid.FindAllSubmatch(out, -1) {
		pid, _ := strconv.Atoi(string(m[1]))
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("nothing listens on %d: %q", port, out)
	}
	return pids
}

// withChildren is pids and their child processes (nginx workers, postgres
// background processes), each once.
func withChildren(t *testing.T, pids []int) []int {
	t.Helper()
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	for _, pid := range pids {
		add(pid)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if ppid, _ := strconv.Atoi(f[1]); seen[ppid] && slices.Contains(pids, ppid) {
			add(c)
		}
	}
	return out
}

func checkApp(t *testing.T, what string, pids []int, want App) {
	t.Helper()
	for _, pid := range pids {
		got, err := Read(procfs.FS{}, pid)
		if err != nil {
			t.Errorf("%s pid %d: %v", what, pid, err)
			continue
		}
		if got != want {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("%s pid %d (%q): %+v, want %+v", what, pid, cmd, got, want)
		}
	}
}

func TestPrivilegedServers(t *testing.T) {
	probetest.RequireTools(t, "ss", "nginx", "redis-server", "memcached", "javac", "java", "python3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	procs := realsrv.NewProcs()
	defer procs.Close()
	defer procs.StopAll()
	// postgres runs as the postgres user: its directories must be reachable
	dir, err := os.MkdirTemp("", "galago-appinfo-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	ng, err := realsrv.StartNginx(ctx, procs, dir)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := realsrv.StartRedis(ctx, procs, dir)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := realsrv.StartMemcached(ctx, procs)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := realsrv.StartPostgresScale(ctx, procs, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	nginx := withChildren(t, listeners(t, ng.Port()))
	if len(nginx) < 2 {
		t.Errorf("nginx: %d processes, want a master and workers", len(nginx))
	}
	checkApp(t, "nginx", nginx, App{Type: "nginx"})
	checkApp(t, "redis", listeners(t, rd.Port()), App{Type: "redis"})
	checkApp(t, "memcached", listeners(t, mc.Port()), App{Type: "memcached"})
	postgres := withChildren(t, listeners(t, pg.Port()))
	if len(postgres) < 3 {
		t.Errorf("postgres: %d processes, want the postmaster and its background processes", len(postgres))
	}
	checkApp(t, "postgres", postgres, App{Type: "postgres"})

	// java: a main class of a known application, and one of none
	src := filepath.Join(dir, "java")
	for _, cls := range []string{"kafka/Kafka", "demo/Main"} {
		pkg, name := filepath.Split(cls)
		if err := os.MkdirAll(filepath.Join(src, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		code := fmt.Sprintf("package %s;\npublic class %s { public static void main(String[] a) throws Exception { System.out.println(\"ready\"); Thread.sleep(60000); } }\n",
			strings.TrimSuffix(pkg, "/"), name)
		if err := os.WriteFile(filepath.Join(src, cls+".java"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("javac", "-d", src, filepath.Join(src, "kafka/Kafka.java"), filepath.Join(src, "demo/Main.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	for cls, want := range map[string]App{"kafka.Kafka": {Type: "kafka", Detail: "kafka.Kafka"}, "demo.Main": {Type: "java", Detail: "demo.Main"}} {
		p := startReady(t, procs, exec.Command("java", "-Xshare:auto", "-cp", src, cls))
		checkApp(t, cls, []int{p}, want)
	}
	py := startReady(t, procs, exec.Command("python3", "-u", "-c", "print('ready'); import time; time.sleep(60)"))
	checkApp(t, "python -c", []int{py}, App{Type: "python"})
}

// startReady starts cmd and waits for it to print "ready".
func startReady(t *testing.T, procs *realsrv.Procs, cmd *exec.Cmd) int {
	t.Helper()
	p, err := procs.Start(cmd.Args[0], cmd)
	if err != nil {
		t.Fatal(err)
	}
	probetest.WaitFor(t, cmd.String()+" ready", func() bool { return strings.Contains(p.Output.String(), "ready") })
	return p.Pid()
}
