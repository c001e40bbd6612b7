package hw

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	dir := filepath.Join(root, "sys", "class", "net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]carrier, 0, len(ents))
	for _, e := range ents {
		c := carrier{dev: e.Name()}
		base := filepath.Join(dir, c.dev)
		if c.up, err = readCount(filepath.Join(base, "carrier_up_count")); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if c.down, err = readCount(filepath.Join(base, "carrier_down_count")); err != nil {
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

// readCount reads a sysfs file holding one unsigned decimal number.
func readCount(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
