package identity

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fileidKernfs is the file handle type of kernfs (cgroup2) inodes:
// FILEID_KERNFS of the kernel's export operations. Its handle is the 64-bit
// kernfs node id, which is what bpf_get_current_cgroup_id() returns.
const fileidKernfs = 0xfe

// cgroupPathByID returns the path, relative to the cgroup2 mount at mount,
// of the cgroup whose id (kernfs node id) is id, by opening it through its
// file handle (open_by_handle_at, CAP_DAC_READ_SEARCH). It fails for a
// cgroup that no longer exists.
func cgroupPathByID(mount string, id uint64) (string, error) {
	mfd, err := unix.Open(mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(mfd)
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], id)
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(fileidKernfs, b[:]), unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("cgroup %d: %w", id, err)
	}
	defer unix.Close(fd)
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	// The link names the directory as galago's mount namespace sees it:
	// under the mount point when the mount is visible there.
	abs, err := filepath.EvalSymlinks(mount)
	if err != nil {
		abs = mount
	}
	if rel, ok := strings.CutPrefix(p, abs); ok && (rel == "" || rel[0] == '/') {
		if rel == "" {
			rel = "/"
		}
		return rel, nil
	}
	return p, nil
}
