package identity

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxCmdline is how much of /proc/<pid>/cmdline is kept, as gala-gopher.
const maxCmdline = 4096

// Stat is the part of /proc/<pid>/stat galago uses.
type Stat struct {
	Comm      string
	State     byte // R, S, D, Z (zombie), ...
	PPID      int
	StartTime uint64 // clock ticks since boot
}

// ParseStat parses the content of /proc/<pid>/stat. The comm field may hold
// spaces and parentheses, so it spans from the first '(' to the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, errors.New("stat: no comm field")
	}
	st := Stat{Comm: string(b[open+1 : closing])}
	// Fields after comm start at field 3 (state): ppid is field 4 and
	// starttime field 22.
	f := bytes.Fields(b[closing+1:])
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("stat: %d fields after comm, want at least 20", len(f))
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return Stat{}, fmt.Errorf("stat: ppid: %w", err)
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("stat: starttime: %w", err)
	}
	st.State = f[0][0]
	st.PPID = ppid
	st.StartTime = start
	return st, nil
}

// ReadStat reads /proc/<pid>/stat under root. It is on the snoop scan and
// enrichment paths (once per process lookup), so unlike procfs.PIDStat,
// which parses all 41 fields after os.ReadFile, it costs three system calls
// (open, one read, close) and parses four fields: about a third of the time.
func ReadStat(root string, pid int) (Stat, error) {
	name := procPath(root, pid, "stat")
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return Stat{}, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	var buf [2048]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil {
		return Stat{}, &os.PathError{Op: "read", Path: name, Err: err}
	}
	if n == len(buf) {
		return Stat{}, fmt.Errorf("%s: longer than %d bytes", name, len(buf))
	}
	return ParseStat(buf[:n])
}

func procPath(root string, pid int, file string) string {
	return filepath.Join(root, "proc", strconv.Itoa(pid), file)
}

// readCapped reads at most n bytes of a file.
func readCapped(name string, n int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(n)))
}

// ParseCmdline splits /proc/<pid>/cmdline into its arguments and the
// space-joined form gala-gopher matches and reports.
func ParseCmdline(b []byte) (cmdline string, args []string) {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return "", nil
	}
	parts := bytes.Split(b, []byte{0})
	args = make([]string, len(parts))
	for i, p := range parts {
		args[i] = string(p)
	}
	return strings.Join(args, " "), args
}

// javaValueOpts are java launcher options whose value is the next argument.
var javaValueOpts = map[string]bool{
	"-cp": true, "-classpath": true, "--class-path": true,
	"-p": true, "--module-path": true, "--upgrade-module-path": true,
	"--add-modules": true, "--limit-modules": true, "--add-reads": true,
	"--add-exports": true, "--add-opens": true, "--patch-module": true,
	"--enable-native-access": true,
}

// JavaMainClass returns what a java command line runs: the main class, the
// jar of -jar, or the module/class of -m. It returns "" when args is not a
// java launcher command line or names nothing to run.
func JavaMainClass(args []string) string {
	if len(args) == 0 || path.Base(args[0]) != "java" {
		return ""
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-jar" || a == "-m" || a == "--module":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case strings.HasPrefix(a, "--module="):
			return strings.TrimPrefix(a, "--module=")
		case javaValueOpts[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// CgroupLine is one line of /proc/<pid>/cgroup.
type CgroupLine struct {
	Hierarchy   int
	Controllers string // "" for the cgroup2 line
	Path        string
}

// ParseCgroup parses /proc/<pid>/cgroup ("id:controllers:path" lines).
func ParseCgroup(b []byte) []CgroupLine {
	var out []CgroupLine
	for _, line := range strings.Split(string(b), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrl, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		h, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		out = append(out, CgroupLine{Hierarchy: h, Controllers: ctrl, Path: p})
	}
	return out
}

// unifiedPath returns the cgroup2 path of the process ("0::<path>"), "" on a
// pure cgroup v1 host.
func unifiedPath(lines []CgroupLine) string {
	for _, l := range lines {
		if l.Hierarchy == 0 && l.Controllers == "" {
			return l.Path
		}
	}
	return ""
}

// ContainerFromCgroup finds the container id and pod uid in a process's
// cgroup paths. The cgroup2 line is tried first, then the v1 lines in file
// order, because on hybrid hosts some runtimes only place processes in the
// v1 hierarchies.
func ContainerFromCgroup(lines []CgroupLine) (containerID, podID string) {
	try := func(p string) bool {
		if containerID == "" {
			containerID = ContainerIDFromPath(p)
		}
		if podID == "" {
			podID = PodIDFromPath(p)
		}
		return containerID != ""
	}
	if u := unifiedPath(lines); u != "" && try(u) {
		return containerID, podID
	}
	for _, l := range lines {
		if l.Hierarchy == 0 && l.Controllers == "" {
			continue
		}
		if try(l.Path) {
			break
		}
	}
	return containerID, podID
}

// ContainerIDFromPath returns the innermost 64-hex container id of a cgroup
// path, "" if there is none. It understands cgroupfs layouts
// (/docker/<id>, /kubepods/burstable/pod<uid>/<id>, containerd's
// /<namespace>/<id>) and systemd scopes (docker-<id>.scope,
// cri-containerd-<id>.scope, crio-<id>.scope, libpod-<id>.scope). CRI-O's and
// podman's conmon scopes are not containers.
func ContainerIDFromPath(p string) string {
	segs := strings.Split(p, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if strings.HasSuffix(s, ".scope") {
			s = strings.TrimSuffix(s, ".scope")
			if strings.Contains(s, "conmon") {
				continue
			}
			if j := strings.LastIndexByte(s, '-'); j >= 0 {
				s = s[j+1:]
			}
		}
		if isHex(s) && len(s) == 64 {
			return strings.ToLower(s)
		}
	}
	return ""
}

// PodIDFromPath returns the pod uid of a kubelet cgroup path: "pod<uid>" in
// the cgroupfs layout, "kubepods-<qos>-pod<uid_with_underscores>.slice" in
// the systemd layout. "" if none.
func PodIDFromPath(p string) string {
	segs := strings.Split(p, "/")
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		var uid string
		switch {
		case strings.HasSuffix(s, ".slice"):
			s = strings.TrimSuffix(s, ".slice")
			j := strings.LastIndex(s, "-pod")
			if j < 0 {
				continue
			}
			uid = strings.ReplaceAll(s[j+4:], "_", "-")
		case strings.HasPrefix(s, "pod"):
			uid = s[3:]
		default:
			continue
		}
		if IsPodID(uid) {
			return strings.ToLower(uid)
		}
	}
	return ""
}

// IsPodID reports whether s has the form of a pod uid: a 36-char uuid, or
// 32 hex digits (static pods' uid is a hash).
func IsPodID(s string) bool {
	switch len(s) {
	case 32:
		return isHex(s)
	case 36:
		for i := 0; i < 36; i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return false
				}
			} else if !isHexByte(s[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// IsContainerID reports whether s is a (possibly abbreviated) container id:
// 1 to 64 hex digits.
func IsContainerID(s string) bool { return len(s) > 0 && len(s) <= 64 && isHex(s) }

// ShortIDLen is the length of the abbreviated container id that gala-gopher
// puts in its container_id labels (and `docker ps` shows).
const ShortIDLen = 12

// ShortID abbreviates a container id to ShortIDLen characters.
func ShortID(id string) string {
	if len(id) > ShortIDLen {
		return id[:ShortIDLen]
	}
	return id
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHexByte(s[i]) {
			return false
		}
	}
	return true
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
