// Package libconfig reads and writes the libconfig configuration format
// (https://hyperrealm.github.io/libconfig/libconfig_manual.html), the syntax of
// gala-gopher.conf and of gala-gopher's .meta table definitions.
//
// The grammar is libconfig 1.7's: settings `name = value` or `name : value`
// ended by an optional `;` or `,`; groups `{...}`, arrays `[...]` of scalars of
// one type, lists `(...)` of any values, trailing commas allowed in lists and
// arrays; strings with the escapes \" \\ \n \r \t \f \xHH (any other
// backslash is kept literally) and adjacent strings joined; decimal and hex
// integers with an optional L/LL suffix for 64-bit; floats; booleans
// true/false in any case; comments #, // and /* */. Every setting keeps the
// line it was defined on.
//
// Differences from the C library, all in the direction of refusing input
// that libconfig silently mangles:
//   - `@include` is rejected with an error: galago never needs it, and
//     following includes would make a config depend on files nobody reviews.
//   - Integer literals that do not fit in 64 bits and floats beyond the
//     float64 range are errors (libconfig saturates or yields inf).
//   - A float literal with no digit at all (".", "-.e5") is an error
//     (libconfig reads 0).
//   - An unterminated string or /* comment is an error even at the end of the
//     file.
//   - Hex literals without L above 0x7fffffff become 64-bit integers with
//     their unsigned value (libconfig wraps them to a negative 32-bit int);
//     like libconfig's hex64, values above 0x7fffffffffffffff wrap to
//     negative int64.
//   - 32- and 64-bit integers may be mixed in one array (libconfig refuses).
//   - Nesting deeper than MaxDepth is an error.
package libconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a setting's value.
type Kind uint8

const (
	KindInt    Kind = iota + 1 // 32-bit integer (libconfig "int")
	KindInt64                  // 64-bit integer (L suffix, or too large for 32 bits)
	KindFloat                  // float64
	KindBool                   // true / false
	KindString                 // string
	KindArray                  // [ scalars of one type ]
	KindList                   // ( any values )
	KindGroup                  // { named settings }
)

var kindNames = [...]string{
	KindInt: "integer", KindInt64: "64-bit integer", KindFloat: "float",
	KindBool: "boolean", KindString: "string", KindArray: "array",
	KindList: "list", KindGroup: "group",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// IsInteger reports whether the kind is one of the two integer kinds.
func (k Kind) IsInteger() bool { return k == KindInt || k == KindInt64 }

// IsScalar reports whether values of this kind may appear in an array.
func (k Kind) IsScalar() bool { return k >= KindInt && k <= KindString }

// Setting is one node of a parsed configuration: a named member of a group,
// an unnamed element of a list or array, or the unnamed root group.
//
// Only the value field matching Kind is meaningful.
type Setting struct {
	Name string // member name; "" for list/array elements and the root
	Line int    // 1-based line of the name (members) or of the value (elements); 0 for the root
	Kind Kind

	Int   int64   // KindInt, KindInt64
	Hex   bool    // KindInt, KindInt64: written in hexadecimal
	Float float64 // KindFloat
	Bool  bool    // KindBool
	Str   string  // KindString

	// Elems holds the elements of a list or array, or the members of a
	// group, in file order.
	Elems []*Setting
}

// Member returns the group member called name, or nil. Names are
// case-sensitive, as in libconfig.
func (s *Setting) Member(name string) *Setting {
	if s == nil || s.Kind != KindGroup {
		return nil
	}
	for _, m := range s.Elems {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Index returns element i of a list, array or group, or nil.
func (s *Setting) Index(i int) *Setting {
	if s == nil || (s.Kind != KindList && s.Kind != KindArray && s.Kind != KindGroup) || i < 0 || i >= len(s.Elems) {
		return nil
	}
	return s.Elems[i]
}

// Len is the number of elements of an aggregate, 0 for a scalar.
func (s *Setting) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Elems)
}

// Lookup finds a setting by path, relative to s: member names separated by
// dots, with [n] for the n-th element of a list, array or group, written
// either "a.b.[0].c" (libconfig's form) or "a.b[0].c". An empty path is s
// itself. It returns nil when any step is missing.
func (s *Setting) Lookup(path string) *Setting {
	cur := s
	for path != "" && cur != nil {
		switch path[0] {
		case '.':
			path = path[1:]
			continue
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil
			}
			i, err := strconv.Atoi(path[1:end])
			if err != nil {
				return nil
			}
			cur = cur.Index(i)
			path = path[end+1:]
			continue
		}
		end := strings.IndexAny(path, ".[")
		if end < 0 {
			end = len(path)
		}
		cur = cur.Member(path[:end])
		path = path[end:]
	}
	return cur
}

// TypeError is returned by the typed accessors when a setting has another
// kind than the one asked for.
type TypeError struct {
	Want string
	Got  *Setting
}

func (e *TypeError) Error() string {
	if e.Got.Kind.IsScalar() {
		return fmt.Sprintf("want %s, got %s %s", e.Want, e.Got.Kind, e.Got.ValueString())
	}
	return fmt.Sprintf("want %s, got %s", e.Want, e.Got.Kind)
}

// IntValue returns the value of an integer setting of either width.
func (s *Setting) IntValue() (int64, error) {
	if !s.Kind.IsInteger() {
		return 0, &TypeError{Want: "an integer", Got: s}
	}
	return s.Int, nil
}

// FloatValue returns the value of a float setting; integers are converted,
// as a number written "5" is a fine float.
func (s *Setting) FloatValue() (float64, error) {
	switch {
	case s.Kind == KindFloat:
		return s.Float, nil
	case s.Kind.IsInteger():
		return float64(s.Int), nil
	}
	return 0, &TypeError{Want: "a number", Got: s}
}

// BoolValue returns the value of a boolean setting.
func (s *Setting) BoolValue() (bool, error) {
	if s.Kind != KindBool {
		return false, &TypeError{Want: "a boolean", Got: s}
	}
	return s.Bool, nil
}

// StringValue returns the value of a string setting.
func (s *Setting) StringValue() (string, error) {
	if s.Kind != KindString {
		return "", &TypeError{Want: "a string", Got: s}
	}
	return s.Str, nil
}

// ValueString renders a scalar value as it would be written in a file
// ("5", "0x1F", "2.5", "true", "\"text\""); aggregates render as their
// kind in angle brackets.
func (s *Setting) ValueString() string {
	switch s.Kind {
	case KindInt, KindInt64:
		var b strings.Builder
		if s.Hex {
			fmt.Fprintf(&b, "0x%X", uint64(s.Int))
		} else {
			b.WriteString(strconv.FormatInt(s.Int, 10))
		}
		if s.Kind == KindInt64 {
			b.WriteByte('L')
		}
		return b.String()
	case KindFloat:
		return formatFloat(s.Float)
	case KindBool:
		return strconv.FormatBool(s.Bool)
	case KindString:
		return quote(s.Str)
	}
	return "<" + s.Kind.String() + ">"
}

// formatFloat writes f so that it scans back as a float with the same value.
func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// Not representable in libconfig; the parser never produces these.
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// quote writes a libconfig string literal. Bytes are kept as they are
// except the quote, the backslash and control characters.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\x%02X`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
