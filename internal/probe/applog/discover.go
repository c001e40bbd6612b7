package applog

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/snoop"
)

// format is how a log file frames its messages.
type format uint8

const (
	fmtPlain  format = iota // one message line per line
	fmtCRI                  // kubelet's CRI format (/var/log/pods, /var/log/containers)
	fmtDocker               // Docker's json-file driver
)

func (f format) String() string { return [...]string{"plain", "cri", "docker"}[f] }

// sourceKey is whose log a file is: a container, else a systemd unit, else
// a process.
type sourceKey struct {
	container string // full container id
	unit      string
	pid       int
}

// candidate is a log file found by discovery.
type candidate struct {
	open   string // path to open, under the host root
	format format
	src    sourceKey
}

// procOrigin is what a process's cgroup says about it.
type procOrigin struct {
	container, podUID, unit string
}

func (p *Probe) origin(pid int) (procOrigin, error) {
	b, err := os.ReadFile(filepath.Join(p.root, "proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return procOrigin{}, err
	}
	lines := identity.ParseCgroup(b)
	var o procOrigin
	o.container, o.podUID = identity.ContainerFromCgroup(lines)
	o.unit = unitFromCgroup(lines)
	return o, nil
}

// unitFromCgroup is the systemd service a process runs in: the innermost
// cgroup path element named *.service, from the cgroup2 line, else from
// systemd's own v1 hierarchy.
func unitFromCgroup(lines []identity.CgroupLine) string {
	for _, unified := range []bool{true, false} {
		for _, l := range lines {
			isUnified := l.Hierarchy == 0 && l.Controllers == ""
			if unified != isUnified || (!unified && l.Controllers != "name=systemd") {
				continue
			}
			parts := strings.Split(l.Path, "/")
			for i := len(parts) - 1; i >= 0; i-- {
				if strings.HasSuffix(parts[i], ".service") && len(parts[i]) > len(".service") {
					return parts[i]
				}
			}
		}
	}
	return ""
}

// containerLogs finds a container's log files: Docker's json-file log,
// kubelet's /var/log/containers/<pod>_<ns>_<name>-<id>.log link, or, when
// no link names the container, the newest <restart>.log of
// /var/log/pods/<ns>_<pod>_<uid>/<name>/ (pod uid from the cgroup path,
// name from the runtime's state).
func (p *Probe) containerLogs(cid, podUID string) []candidate {
	src := sourceKey{container: cid}
	var out []candidate
	docker := filepath.Join(p.root, p.dockerRoot, "containers", cid, cid+"-json.log")
	if fi, err := os.Stat(docker); err == nil && fi.Mode().IsRegular() {
		out = append(out, candidate{open: docker, format: fmtDocker, src: src})
	}
	logRoot := filepath.Join(p.root, p.logRoot)
	if ents, err := os.ReadDir(filepath.Join(logRoot, "containers")); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), "-"+cid+".log") {
				out = append(out, candidate{open: filepath.Join(logRoot, "containers", e.Name()), format: fmtCRI, src: src})
				return out
			}
		}
	}
	if podUID == "" || p.ids == nil {
		return out
	}
	c, ok := p.ids.Container(cid)
	if !ok || c.Name == "" {
		return out
	}
	dirs, _ := filepath.Glob(filepath.Join(logRoot, "pods", "*_"+podUID, c.Name))
	for _, d := range dirs {
		if f := newestRestartLog(d); f != "" {
			out = append(out, candidate{open: f, format: fmtCRI, src: src})
		}
	}
	return out
}

// newestRestartLog is the <n>.log of a container's log directory with the
// highest n: the one its current instance writes.
func newestRestartLog(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	best, bestN := "", -1
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err != nil || !strings.HasSuffix(e.Name(), ".log") || !e.Type().IsRegular() {
			continue
		}
		if n > bestN {
			best, bestN = filepath.Join(dir, e.Name()), n
		}
	}
	return best
}

// maxFDs bounds the descriptors looked at per process and discovery.
const maxFDs = 4096

// writtenLogs lists the regular files under the log root that a process has
// open for writing (/proc/<pid>/fd and fdinfo), as paths to open: through
// /proc/<pid>/root for a process in a container (its mount namespace),
// under the host root otherwise. The runtimes' own files under
// <log root>/pods and <log root>/containers are left to containerLogs.
func (p *Probe) writtenLogs(pid int, inContainer bool) []string {
	procDir := filepath.Join(p.root, "proc", strconv.Itoa(pid))
	ents, err := os.ReadDir(filepath.Join(procDir, "fd"))
	if err != nil {
		return nil
	}
	if len(ents) > maxFDs {
		ents = ents[:maxFDs]
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(procDir, "fd", e.Name()))
		if err != nil || !p.underLogRoot(target) {
			continue
		}
		if !openForWriting(filepath.Join(procDir, "fdinfo", e.Name())) {
			continue
		}
		var open string
		if inContainer {
			open = filepath.Join(procDir, "root", target)
		} else {
			open = filepath.Join(p.root, target)
		}
		if fi, err := os.Stat(open); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if !slices.Contains(out, open) {
			out = append(out, open)
		}
	}
	return out
}

func (p *Probe) underLogRoot(target string) bool {
	if !strings.HasPrefix(target, p.logRoot+"/") || strings.HasSuffix(target, " (deleted)") {
		return false
	}
	rel := target[len(p.logRoot)+1:]
	return !strings.HasPrefix(rel, "pods/") && !strings.HasPrefix(rel, "containers/")
}

// openForWriting reads the flags line of an fdinfo file: the access mode
// is write-only or read-write.
func openForWriting(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	return fdinfoWritable(b)
}

func fdinfoWritable(b []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "flags:")
		if !ok {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
		if err != nil {
			return false
		}
		acc := flags & 3
		return acc == 1 || acc == 2
	}
	return false
}

// observedPIDs is the process set to look at: the resolved set of a
// whitelist, every other process for a blacklist; galago itself never.
func (p *Probe) observedPIDsOf(cfg probe.Config) []int {
	t := cfg.Targets
	if t == nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	if t.Mode() == snoop.Whitelist {
		pids = t.PIDs()
	} else {
		ents, err := os.ReadDir(filepath.Join(p.root, "proc"))
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && t.Observed(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return slices.DeleteFunc(pids, func(pid int) bool { return pid == self })
}
