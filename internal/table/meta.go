package table

import (
	"fmt"

	"github.com/galago-project/galago/internal/libconfig"
)

// ParseMeta reads a gala-gopher .meta file (libconfig syntax: version and a
// measurements list of {table_name, entity_name, fields: ({type, name,
// description})}). Custom probes use it at run time; the built-in tables are
// generated from the same files.
func ParseMeta(filename string, data []byte) ([]*Table, error) {
	root, err := libconfig.Parse(filename, data)
	if err != nil {
		return nil, err
	}
	version := ""
	if v := root.Member("version"); v != nil {
		version = v.Str
	}
	ms := root.Member("measurements")
	if ms == nil || (ms.Kind != libconfig.KindList && ms.Kind != libconfig.KindArray) {
		return nil, fmt.Errorf("%s: no measurements list", filename)
	}
	var out []*Table
	for _, m := range ms.Elems {
		name, entity := str(m, "table_name"), str(m, "entity_name")
		if name == "" || entity == "" {
			return nil, fmt.Errorf("%s:%d: measurement needs table_name and entity_name", filename, m.Line)
		}
		fs := m.Member("fields")
		if fs == nil || len(fs.Elems) == 0 {
			return nil, fmt.Errorf("%s:%d: table %s has no fields", filename, m.Line, name)
		}
		fields := make([]Field, 0, len(fs.Elems))
		seen := map[string]bool{}
		for _, f := range fs.Elems {
			kind, err := ParseKind(str(f, "type"))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: table %s: %w", filename, f.Line, name, err)
			}
			fname := str(f, "name")
			if fname == "" || seen[fname] {
				return nil, fmt.Errorf("%s:%d: table %s: empty or duplicate field name %q", filename, f.Line, name, fname)
			}
			seen[fname] = true
			fields = append(fields, Field{Name: fname, Kind: kind, Description: str(f, "description")})
		}
		if fields[0].Kind != KindKey {
			return nil, fmt.Errorf("%s:%d: table %s: the first field must be a key", filename, m.Line, name)
		}
		out = append(out, New(name, entity, version, fields...))
	}
	return out, nil
}

func str(s *libconfig.Setting, name string) string {
	if m := s.Member(name); m != nil && m.Kind == libconfig.KindString {
		return m.Str
	}
	return ""
}
