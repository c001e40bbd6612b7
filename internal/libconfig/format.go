package libconfig

import (
	"bytes"
	"strings"
)

// Format writes the members of a root group as a libconfig document in the
// layout of gala-gopher's shipped files: `name = value;`, groups opened on
// their own line, four-space indentation. Parsing the output gives back the
// same tree (line numbers aside).
func Format(root *Setting) []byte {
	var b bytes.Buffer
	for i, m := range root.Elems {
		if i > 0 && m.Kind == KindGroup {
			b.WriteByte('\n')
		}
		writeMember(&b, m, 0)
	}
	return b.Bytes()
}

func writeMember(b *bytes.Buffer, s *Setting, depth int) {
	indent(b, depth)
	b.WriteString(s.Name)
	if s.Kind == KindGroup {
		b.WriteString(" =\n")
		indent(b, depth)
	} else {
		b.WriteString(" = ")
	}
	writeValue(b, s, depth)
	b.WriteString(";\n")
}

func writeValue(b *bytes.Buffer, s *Setting, depth int) {
	switch s.Kind {
	case KindGroup:
		b.WriteString("{\n")
		for _, m := range s.Elems {
			writeMember(b, m, depth+1)
		}
		indent(b, depth)
		b.WriteByte('}')
	case KindArray, KindList:
		open, close := "[", "]"
		if s.Kind == KindList {
			open, close = "(", ")"
		}
		b.WriteString(open)
		if s.Kind == KindList && len(s.Elems) > 0 && !allScalars(s.Elems) {
			// One element per line, the layout of the .meta files.
			b.WriteByte('\n')
			for i, e := range s.Elems {
				indent(b, depth+1)
				writeValue(b, e, depth+1)
				if i < len(s.Elems)-1 {
					b.WriteByte(',')
				}
				b.WriteByte('\n')
			}
			indent(b, depth)
		} else {
			for i, e := range s.Elems {
				if i > 0 {
					b.WriteString(", ")
				}
				writeValue(b, e, depth+1)
			}
		}
		b.WriteString(close)
	default:
		b.WriteString(s.ValueString())
	}
}

func allScalars(elems []*Setting) bool {
	for _, e := range elems {
		if !e.Kind.IsScalar() {
			return false
		}
	}
	return true
}

func indent(b *bytes.Buffer, depth int) {
	b.WriteString(strings.Repeat("    ", depth))
}
