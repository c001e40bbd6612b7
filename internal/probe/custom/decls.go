package custom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// DefaultPath is where gala-gopher reads its custom probe declarations.
const DefaultPath = "/etc/gala-gopher/gala-gopher-custom.json"

// Limits of gala-gopher-custom.json, as gala-gopher enforces them.
const (
	maxProbes   = 8
	maxSubItems = 8
	// maxNameLen keeps a name addressable as a REST path and a probe name
	// (gala-gopher's MAX_PROBE_NAME_LEN is 32 with the terminating NUL).
	maxNameLen = 31
)

// Modes gala-gopher demands. galago accepts these or fewer bits.
const (
	confMode fs.FileMode = 0o640
	binMode  fs.FileMode = 0o550
)

// permCheck holds the ownership and mode rules for the declaration file and
// the probe executables. owner is the uid that must own them: root (0)
// outside tests.
type permCheck struct{ owner uint32 }

var rootOnly = permCheck{owner: 0}

// unixMode renders a FileMode's permission and special bits as chmod(1)
// would write them.
func unixMode(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

func (c permCheck) ownerName() string {
	if c.owner == 0 {
		return "root"
	}
	return fmt.Sprintf("uid %d", c.owner)
}

// config checks gala-gopher-custom.json: owned by root, mode 0640 or
// stricter (in particular neither group- nor world-writable).
func (c permCheck) config(uid uint32, mode fs.FileMode) error {
	var broken []string
	if !mode.IsRegular() {
		broken = append(broken, "is not a regular file")
	}
	if uid != c.owner {
		broken = append(broken, fmt.Sprintf("is owned by uid %d, not %s", uid, c.ownerName()))
	}
	if mode&0o020 != 0 {
		broken = append(broken, "is group-writable")
	}
	if mode&0o002 != 0 {
		broken = append(broken, "is world-writable")
	}
	if mode&0o004 != 0 {
		broken = append(broken, "is world-readable")
	}
	if mode&0o111 != 0 {
		broken = append(broken, "is executable")
	}
	if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		broken = append(broken, "has setuid, setgid or sticky bits")
	}
	if len(broken) == 0 {
		return nil
	}
	return fmt.Errorf("mode %s %s; it must be owned by %s with mode %04o",
		unixMode(mode), strings.Join(broken, ", "), c.ownerName(), uint32(confMode))
}

// bin checks a probe executable: owned by root, mode 0550 or stricter
// (writable by nobody, no access for others) and executable by its owner.
func (c permCheck) bin(uid uint32, mode fs.FileMode) error {
	var broken []string
	if !mode.IsRegular() {
		broken = append(broken, "is not a regular file")
	}
	if uid != c.owner {
		broken = append(broken, fmt.Sprintf("is owned by uid %d, not %s", uid, c.ownerName()))
	}
	if mode&0o200 != 0 {
		broken = append(broken, "is writable by its owner")
	}
	if mode&0o020 != 0 {
		broken = append(broken, "is group-writable")
	}
	if mode&0o002 != 0 {
		broken = append(broken, "is world-writable")
	}
	if mode&0o005 != 0 {
		broken = append(broken, "is world-readable or world-executable")
	}
	if mode&0o100 == 0 {
		broken = append(broken, "is not executable by its owner")
	}
	if mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		broken = append(broken, "has setuid, setgid or sticky bits")
	}
	if len(broken) == 0 {
		return nil
	}
	return fmt.Errorf("mode %s %s; it must be owned by %s with mode %04o",
		unixMode(mode), strings.Join(broken, ", "), c.ownerName(), uint32(binMode))
}

// stat returns a file's owner and mode (following symlinks: what is checked
// is what gets read or executed).
func stat(path string) (uint32, fs.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no owner information", path)
	}
	return st.Uid, fi.Mode(), nil
}

// checkBinFile applies the bin rules to the file at path.
func (c permCheck) checkBinFile(path string) error {
	uid, mode, err := stat(path)
	if err != nil {
		return err
	}
	if err := c.bin(uid, mode); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// MetaPath is where a custom probe's .meta lives: bin with its last
// extension replaced by ".meta" (/opt/x/myprobe.sh -> /opt/x/myprobe.meta,
// /opt/x/myprobe -> /opt/x/myprobe.meta).
func MetaPath(bin string) string {
	return strings.TrimSuffix(bin, filepath.Ext(bin)) + ".meta"
}

// LoadMeta parses a custom probe's .meta file.
func LoadMeta(feat *probe.Feature) ([]*table.Table, error) {
	if feat.Custom == nil {
		return nil, fmt.Errorf("%s is not a custom probe", feat.Name)
	}
	data, err := os.ReadFile(feat.Custom.MetaPath)
	if err != nil {
		return nil, fmt.Errorf("custom probe %s: meta file: %w", feat.Name, err)
	}
	tables, err := table.ParseMeta(feat.Custom.MetaPath, data)
	if err != nil {
		return nil, fmt.Errorf("custom probe %s: meta file: %w", feat.Name, err)
	}
	return tables, nil
}

// LoadDecls reads gala-gopher-custom.json and returns one feature per
// declared probe, in file order. A missing file means no custom probes. Any
// broken rule (ownership, mode, names, limits, an invalid .meta) fails the
// whole load, as it stops gala-gopher from starting.
func LoadDecls(path string) ([]*probe.Feature, error) {
	return loadDecls(path, rootOnly)
}

// declJSON is one entry of the file.
type declJSON struct {
	Bin         *string   `json:"bin"`
	Probe       *[]string `json:"probe"`
	CustomParam *string   `json:"custom_param"`
}

func loadDecls(path string, perm permCheck) ([]*probe.Feature, error) {
	uid, mode, err := stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("custom probes: %w", err)
	}
	if err := perm.config(uid, mode); err != nil {
		return nil, fmt.Errorf("custom probes: %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("custom probes: %w", err)
	}
	feats, err := parseDecls(data)
	if err != nil {
		return nil, fmt.Errorf("custom probes: %s: %w", path, err)
	}
	tableOwner := map[string]string{}
	for _, f := range feats {
		if err := perm.checkBinFile(f.Custom.Bin); err != nil {
			return nil, fmt.Errorf("custom probes: %s: probe %s: bin %w", path, f.Name, err)
		}
		tables, err := LoadMeta(f)
		if err != nil {
			return nil, fmt.Errorf("custom probes: %s: %w", path, err)
		}
		for _, t := range tables {
			if table.Lookup(t.Name) != nil {
				return nil, fmt.Errorf("custom probes: %s: probe %s: table %s in %s clashes with a built-in table",
					path, f.Name, t.Name, f.Custom.MetaPath)
			}
			if other, dup := tableOwner[t.Name]; dup {
				return nil, fmt.Errorf("custom probes: %s: probe %s: table %s in %s is already declared by probe %s",
					path, f.Name, t.Name, f.Custom.MetaPath, other)
			}
			tableOwner[t.Name] = f.Name
		}
	}
	return feats, nil
}

// parseDecls decodes the file's JSON, keeping the object's key order: it
// fixes each probe's IPC type.
func parseDecls(data []byte) ([]*probe.Feature, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("invalid JSON: the top level must be an object")
	}
	var feats []*probe.Feature
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		name := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("probe %q is declared twice", name)
		}
		seen[name] = true
		if len(feats) == maxProbes {
			return nil, fmt.Errorf("more than %d custom probes declared", maxProbes)
		}
		f, err := parseDecl(name, raw, len(feats)+1)
		if err != nil {
			return nil, err
		}
		feats = append(feats, f)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("invalid JSON: data after the top-level object")
	}
	return feats, nil
}

func validName(name string) error {
	if name == "" {
		return errors.New("a probe name is empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("probe name %q is longer than %d characters", name, maxNameLen)
	}
	for _, r := range name {
		if !nameChar(r) {
			return fmt.Errorf("probe name %q: only letters, digits, '_', '-' and '.' are allowed", name)
		}
	}
	if probe.LookupBuiltin(name) != nil {
		return fmt.Errorf("probe name %q clashes with a built-in feature", name)
	}
	return nil
}

func nameChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return r == '_' || r == '-' || r == '.'
}

func parseDecl(name string, raw json.RawMessage, index int) (*probe.Feature, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	var d declJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("probe %s: %q has the wrong type (%s)", name, te.Field, te.Value)
		}
		return nil, fmt.Errorf("probe %s: must be an object with bin, probe and custom_param", name)
	}
	if d.Bin == nil || *d.Bin == "" {
		return nil, fmt.Errorf("probe %s: bin is missing", name)
	}
	bin := *d.Bin
	if !filepath.IsAbs(bin) || filepath.Clean(bin) != bin {
		return nil, fmt.Errorf("probe %s: bin %q must be a clean absolute path", name, bin)
	}
	f := &probe.Feature{
		Name:    name,
		IPCType: 100 + index,
		// gala-gopher leaves it undefined; see the package doc.
		Snooper: probe.SnooperProc,
		Custom:  &probe.CustomDecl{Bin: bin, MetaPath: MetaPath(bin)},
	}
	if d.Probe != nil {
		if len(*d.Probe) > maxSubItems {
			return nil, fmt.Errorf("probe %s: more than %d sub-items in \"probe\"", name, maxSubItems)
		}
		for i, s := range *d.Probe {
			if s == "" {
				return nil, fmt.Errorf("probe %s: empty sub-item name in \"probe\"", name)
			}
			if _, dup := f.SubItemBit(s); dup {
				return nil, fmt.Errorf("probe %s: sub-item %q is listed twice", name, s)
			}
			f.SubItems = append(f.SubItems, probe.SubItem{Name: s, Bit: 1 << i})
			f.Custom.SubItemList = append(f.Custom.SubItemList, s)
		}
	}
	if d.CustomParam != nil {
		for p := range strings.SplitSeq(*d.CustomParam, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if slices.Contains(f.Custom.Params, p) {
				return nil, fmt.Errorf("probe %s: custom_param %q is listed twice", name, p)
			}
			f.Custom.Params = append(f.Custom.Params, p)
		}
	}
	return f, nil
}
