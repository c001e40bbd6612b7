package ioprobe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysBlock reads block device facts from sysfs under a host root
// (GOPHER_HOST_PATH; "" is /).
type sysBlock struct{ root string }

func (s sysBlock) path(p ...string) string {
	return filepath.Join(append([]string{s.root, "/sys"}, p...)...)
}

// parseDev parses a sysfs "dev" file: "<major>:<minor>\n".
func parseDev(r io.Reader) (Dev, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return Dev{}, err
	}
	ma, mi, ok := strings.Cut(strings.TrimSpace(line), ":")
	if !ok {
		return Dev{}, fmt.Errorf("dev %q: want major:minor", line)
	}
	major, err1 := strconv.ParseUint(ma, 10, 32)
	minor, err2 := strconv.ParseUint(mi, 10, 32)
	if err := errors.Join(err1, err2); err != nil || major >= 1<<12 || minor >= 1<<minorBits {
		return Dev{}, fmt.Errorf("dev %q: bad major:minor", line)
	}
	return Dev{Major: uint32(major), Minor: uint32(minor)}, nil
}

func readDev(path string) (Dev, error) {
	f, err := os.Open(path)
	if err != nil {
		return Dev{}, err
	}
	defer f.Close()
	return parseDev(f)
}

// names resolves a device number to its labels through
// /sys/dev/block/M:m, a link to .../block/<disk>[/<partition>]. Unknown
// devices (gone, or never in sysfs) get empty names, as in gala-gopher.
func (s sysBlock) names(d Dev) names {
	link := s.path("dev", "block", fmt.Sprintf("%d:%d", d.Major, d.Minor))
	target, err := os.Readlink(link)
	if err != nil {
		return names{}
	}
	dir := filepath.Join(filepath.Dir(link), target)
	n := names{blk: filepath.Base(dir), disk: filepath.Base(dir)}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		n.disk = filepath.Base(filepath.Dir(dir))
	}
	return n
}

// devices resolves params.dev_name to the devices it selects: the named
// device, and, when it is a whole disk, its partitions (their bytes and
// page cache are the disk's too). An unknown name selects nothing.
func (s sysBlock) devices(name string) ([]Dev, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("dev_name %q is not a block device name", name)
	}
	dir := s.path("class", "block", name)
	d, err := readDev(filepath.Join(dir, "dev"))
	if err != nil {
		return nil, fmt.Errorf("dev_name %s: %w", name, err)
	}
	out := []Dev{d}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		return out, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out, nil
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "partition")); err != nil {
			continue
		}
		if pd, err := readDev(filepath.Join(dir, e.Name(), "dev")); err == nil {
			out = append(out, pd)
		}
	}
	return out, nil
}
