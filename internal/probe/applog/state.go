package applog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// stateVersion is the layout of the offsets file.
const stateVersion = 1

// maxStateEntries bounds the offsets file: the files read now always stay,
// the others are dropped oldest first.
const maxStateEntries = 4096

// stateEntry is where reading of one file stopped, as of the last report.
type stateEntry struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Btime int64  `json:"btime,omitempty"`
	Path  string `json:"path"`
	Off   int64  `json:"off"`
	Seen  int64  `json:"seen"` // unix s of the last report that covered it
}

type stateFile struct {
	Version int          `json:"version"`
	Files   []stateEntry `json:"files"`
}

func loadState(path string) (map[fileID]stateEntry, error) {
	out := map[fileID]stateEntry{}
	if path == "" {
		return out, nil
	}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return out, fmt.Errorf("%s: %w", path, err)
	}
	if sf.Version != stateVersion {
		return out, fmt.Errorf("%s: version %d, want %d", path, sf.Version, stateVersion)
	}
	for _, e := range sf.Files {
		out[fileID{e.Dev, e.Ino}] = e
	}
	return out, nil
}

// saveState writes the offsets atomically (a temporary file renamed over
// the old one), keeping at most maxStateEntries, the most recent.
func saveState(path string, m map[fileID]stateEntry) error {
	if path == "" {
		return nil
	}
	sf := stateFile{Version: stateVersion, Files: make([]stateEntry, 0, len(m))}
	for _, e := range m {
		sf.Files = append(sf.Files, e)
	}
	sort.Slice(sf.Files, func(i, j int) bool {
		a, b := sf.Files[i], sf.Files[j]
		if a.Seen != b.Seen {
			return a.Seen > b.Seen
		}
		return a.Path < b.Path
	})
	if len(sf.Files) > maxStateEntries {
		for _, e := range sf.Files[maxStateEntries:] {
			delete(m, fileID{e.Dev, e.Ino})
		}
		sf.Files = sf.Files[:maxStateEntries]
	}
	b, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
