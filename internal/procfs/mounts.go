package procfs

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/<pid>/mountinfo (proc(5)).
type Mount struct {
	ID, ParentID int
	Major, Minor uint32 // st_dev of the mounted filesystem
	Root         string // path of the mount's root within its filesystem
	MountPoint   string
	Options      []string // per-mount options (rw, nosuid, relatime, ...)
	FSType       string
	Source       string
	SuperOptions []string // per-superblock options
}

// ReadOnly reports whether the mount is read-only.
func (m Mount) ReadOnly() bool { return slices.Contains(m.Options, "ro") }

// Mounts reads the mount table of the host's init process
// (<root>/proc/1/mountinfo), falling back to the reader's own
// (<root>/proc/self/mountinfo) when PID 1's is not readable.
func (fs FS) Mounts() ([]Mount, error) {
	m, err := parseFile(fs.proc("1", "mountinfo"), parseMountinfo)
	if err == nil {
		return m, nil
	}
	return parseFile(fs.proc("self", "mountinfo"), parseMountinfo)
}

func parseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	s := newScanner(r)
	for s.Scan() {
		line := s.Text()
		if line == "" {
			continue
		}
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("no separator in %q", line)
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 6 || len(g) < 2 {
			return nil, fmt.Errorf("too few fields in %q", line)
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		maj, min, ok := strings.Cut(f[2], ":")
		major, err3 := strconv.ParseUint(maj, 10, 32)
		minor, err4 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !ok {
			return nil, fmt.Errorf("bad ids in %q", line)
		}
		m := Mount{
			ID: id, ParentID: parent, Major: uint32(major), Minor: uint32(minor),
			Root: unescapeOctal(f[3]), MountPoint: unescapeOctal(f[4]),
			Options: strings.Split(f[5], ","),
			FSType:  unescapeOctal(g[0]), Source: unescapeOctal(g[1]),
		}
		if len(g) > 2 {
			m.SuperOptions = strings.Split(g[2], ",")
		}
		out = append(out, m)
	}
	return out, s.Err()
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline
// and backslash in mount paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FSUsage is what statfs(2) says of a mounted filesystem. Block counts are
// in units of FragmentSize bytes.
type FSUsage struct {
	Blocks, BlocksFree, BlocksAvail uint64 // BlocksAvail: free to unprivileged users
	Files, FilesFree                uint64
	FragmentSize                    uint64
}

// Statfs calls statfs(2) on the host path mountPoint under the root. It
// can block for as long as the filesystem does (a hung NFS server).
func (fs FS) Statfs(mountPoint string) (FSUsage, error) {
	var st unix.Statfs_t
	p := fs.Path(mountPoint)
	if err := unix.Statfs(p, &st); err != nil {
		return FSUsage{}, fmt.Errorf("statfs %s: %w", p, err)
	}
	frsize := uint64(st.Frsize)
	if frsize == 0 {
		frsize = uint64(st.Bsize)
	}
	return FSUsage{Blocks: st.Blocks, BlocksFree: st.Bfree, BlocksAvail: st.Bavail,
		Files: st.Files, FilesFree: st.Ffree, FragmentSize: frsize}, nil
}
