package hw

import (
	"errors"
	"os"
	"path/filepath"
	"sort"

	"github.com/galago-project/galago/internal/procfs"
)

// carrier is one interface's carrier counters from sysfs.
type carrier struct {
	dev    string
	driver string // "" for virtual devices (no parent device driver)
	up     uint64 // carrier_up_count
	down   uint64 // carrier_down_count
}

// readCarriers lists the interfaces under root/sys/class/net with their
// carrier counters (Linux 4.16+ has carrier_up_count and carrier_down_count).
// An interface that disappears while being read is skipped; a counter file
// that exists but does not parse is an error naming the file.
func readCarriers(root string) ([]carrier, error) {
	fs := procfs.FS{Root: root}
	dir := fs.Path("/sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]carrier, 0, len(ents))
	for _, e := range ents {
		c := carrier{dev: e.Name()}
		base := filepath.Join(dir, c.dev)
		rel := filepath.Join("/sys/class/net", c.dev)
		if c.up, err = fs.ReadUint(filepath.Join(rel, "carrier_up_count")); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if c.down, err = fs.ReadUint(filepath.Join(rel, "carrier_down_count")); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if l, err := os.Readlink(filepath.Join(base, "device", "driver")); err == nil {
			c.driver = filepath.Base(l)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dev < out[j].dev })
	return out, nil
}
