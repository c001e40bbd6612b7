package symtab

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Mapping is one executable line of /proc/<pid>/maps.
type Mapping struct {
	Start, End uint64
	Offset     uint64 // file offset of Start
	Path       string // "" for anonymous memory
}

// ParseMaps reads the executable mappings of a /proc/<pid>/maps file,
// sorted by start address.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// start-end perms offset dev inode [path]
		fields := strings.Fields(line)
		if len(fields) < 5 {
			return nil, fmt.Errorf("maps: short line %q", line)
		}
		if len(fields[1]) < 3 || fields[1][2] != 'x' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps: bad range %q", fields[0])
		}
		var m Mapping
		var err error
		if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
			return nil, fmt.Errorf("maps: %w", err)
		}
		if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
			return nil, fmt.Errorf("maps: %w", err)
		}
		if m.Offset, err = strconv.ParseUint(fields[2], 16, 64); err != nil {
			return nil, fmt.Errorf("maps: %w", err)
		}
		if len(fields) >= 6 {
			// The path is everything after the inode; it may hold spaces.
			idx := strings.Index(line, fields[5])
			m.Path = strings.TrimSuffix(line[idx:], " (deleted)")
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, nil
}

func findMapping(maps []Mapping, pc uint64) *Mapping {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].End > pc })
	if i < len(maps) && maps[i].Start <= pc {
		return &maps[i]
	}
	return nil
}
