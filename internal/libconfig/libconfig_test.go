package libconfig

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// shippedConf is gala-gopher's shipped config, kept once for the whole
// repository in the top-level testdata.
const shippedConf = "../../deploy/package/gala-gopher.conf"

func mustParse(t *testing.T, src string) *Setting {
	t.Helper()
	root, err := Parse("test.conf", []byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return root
}

func TestShippedConf(t *testing.T) {
	data, err := os.ReadFile(shippedConf)
	if err != nil {
		t.Fatal(err)
	}
	root, err := Parse(shippedConf, data)
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range root.Elems {
		sections = append(sections, m.Name)
		if m.Kind != KindGroup {
			t.Errorf("%s: kind %s, want group", m.Name, m.Kind)
		}
	}
	want := []string{"global", "metric", "event", "meta", "imdb", "web_server", "rest_api_server", "kafka", "logs"}
	if !reflect.DeepEqual(sections, want) {
		t.Errorf("sections %v, want %v", sections, want)
	}
	checks := []struct {
		path string
		line int
		kind Kind
		val  string
	}{
		{"global.log_file_name", 4, KindString, `"gopher.log"`},
		{"global.rest_api_on", 6, KindBool, "true"},
		{"event.timeout", 19, KindInt, "600"},
		{"imdb.max_tables_num", 30, KindInt, "1024"},
		{"rest_api_server.port", 49, KindInt, "9999"},
		{"kafka.kafka_broker", 58, KindString, `""`},
		{"logs.debug_dir", 72, KindString, `"/var/log/gala-gopher/debug"`},
	}
	for _, c := range checks {
		s := root.Lookup(c.path)
		if s == nil {
			t.Errorf("%s: missing", c.path)
			continue
		}
		if s.Line != c.line || s.Kind != c.kind || s.ValueString() != c.val {
			t.Errorf("%s: line %d kind %s value %s, want line %d kind %s value %s",
				c.path, s.Line, s.Kind, s.ValueString(), c.line, c.kind, c.val)
		}
	}
	if root.Lookup("global").Line != 2 {
		t.Errorf("global at line %d, want 2", root.Lookup("global").Line)
	}
}

func TestAllMetaFiles(t *testing.T) {
	files, err := filepath.Glob("../table/meta/*.meta")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "testdata/example.meta")
	if len(files) != 26 {
		t.Fatalf("found %d .meta files, want the 26 of gala-gopher", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		root, err := Parse(f, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		// Every gala-gopher .meta: version string + list of table groups
		// each with table_name, entity_name and a list of fields.
		if _, err := root.Lookup("version").StringValue(); err != nil {
			t.Errorf("%s: version: %v", f, err)
		}
		ms := root.Lookup("measurements")
		if ms == nil || ms.Kind != KindList || ms.Len() == 0 {
			t.Errorf("%s: measurements missing or empty", f)
			continue
		}
		for i, m := range ms.Elems {
			for _, k := range []string{"table_name", "entity_name"} {
				if _, err := m.Lookup(k).StringValue(); m.Lookup(k) == nil || err != nil {
					t.Errorf("%s: measurements[%d].%s missing or not a string", f, i, k)
				}
			}
			fields := m.Lookup("fields")
			if fields == nil || fields.Kind != KindList || fields.Len() == 0 {
				t.Errorf("%s: measurements[%d].fields missing", f, i)
				continue
			}
			for j, fd := range fields.Elems {
				for _, k := range []string{"name", "type", "description"} {
					if s := fd.Member(k); s == nil || s.Kind != KindString {
						t.Errorf("%s: measurements[%d].fields[%d].%s missing or not a string", f, i, j, k)
					}
				}
			}
		}
	}
}

func TestExampleMeta(t *testing.T) {
	data, err := os.ReadFile("testdata/example.meta")
	if err != nil {
		t.Fatal(err)
	}
	root, err := Parse("example.meta", data)
	if err != nil {
		t.Fatal(err)
	}
	if v := root.Lookup("version"); v.Str != "1.0.0" || v.Line != 1 {
		t.Errorf("version = %q at line %d", v.Str, v.Line)
	}
	tbl := root.Lookup("measurements.[0]")
	if tbl == nil || tbl.Kind != KindGroup || tbl.Line != 5 || tbl.Name != "" {
		t.Fatalf("measurements.[0] = %+v", tbl)
	}
	var names, types []string
	for _, f := range root.Lookup("measurements[0].fields").Elems {
		names = append(names, f.Member("name").Str)
		types = append(types, f.Member("type").Str)
	}
	if want := []string{"key_name", "cpu_usage", "memory_usage", "tcp_connection_num"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	if want := []string{"key", "gauge", "gauge", "counter"}; !reflect.DeepEqual(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
	if s := root.Lookup("measurements.[0].fields.[3].name"); s.Str != "tcp_connection_num" || s.Line != 28 {
		t.Errorf("fields[3].name = %q at line %d, want tcp_connection_num at 28", s.Str, s.Line)
	}
	if s := root.Lookup("measurements.[0].fields.[1]"); s.Line != 15 {
		t.Errorf("fields[1] at line %d, want 15 (its opening brace)", s.Line)
	}
}

func TestScalars(t *testing.T) {
	cases := []struct {
		src  string
		kind Kind
		i    int64
		f    float64
		b    bool
		s    string
		hex  bool
	}{
		{"a = 5;", KindInt, 5, 0, false, "", false},
		{"a = -5", KindInt, -5, 0, false, "", false},
		{"a : +7,", KindInt, 7, 0, false, "", false},
		{"a = 2147483647;", KindInt, math.MaxInt32, 0, false, "", false},
		{"a = 2147483648;", KindInt64, 2147483648, 0, false, "", false},
		{"a = -2147483649;", KindInt64, -2147483649, 0, false, "", false},
		{"a = 5L;", KindInt64, 5, 0, false, "", false},
		{"a = 5LL;", KindInt64, 5, 0, false, "", false},
		{"a = 9223372036854775807L;", KindInt64, math.MaxInt64, 0, false, "", false},
		{"a = 0x1F;", KindInt, 31, 0, false, "", true},
		{"a = 0XfF;", KindInt, 255, 0, false, "", true},
		{"a = 0x1FL;", KindInt64, 31, 0, false, "", true},
		{"a = 0xFFFFFFFF;", KindInt64, 0xFFFFFFFF, 0, false, "", true},
		{"a = 0xFFFFFFFFFFFFFFFFL;", KindInt64, -1, 0, false, "", true},
		{"a = 1.5;", KindFloat, 0, 1.5, false, "", false},
		{"a = -.5;", KindFloat, 0, -0.5, false, "", false},
		{"a = 5.;", KindFloat, 0, 5, false, "", false},
		{"a = 1e3;", KindFloat, 0, 1000, false, "", false},
		{"a = 1.5E-2;", KindFloat, 0, 0.015, false, "", false},
		{"a = +2.5e+1;", KindFloat, 0, 25, false, "", false},
		{"a = true;", KindBool, 0, 0, true, "", false},
		{"a = FALSE;", KindBool, 0, 0, false, "", false},
		{"a = TrUe;", KindBool, 0, 0, true, "", false},
		{`a = "x";`, KindString, 0, 0, false, "x", false},
		{`a = "";`, KindString, 0, 0, false, "", false},
		{`a = "q\"b\\n\n\r\t\f";`, KindString, 0, 0, false, "q\"b\\n\n\r\t\f", false},
		{`a = "\x41\x7a\x0";`, KindString, 0, 0, false, "Az\\x0", false},
		{`a = "back\slash";`, KindString, 0, 0, false, `back\slash`, false},
		{"a = \"ab\" \"cd\"\n  /* c */ \"ef\";", KindString, 0, 0, false, "abcdef", false},
		{"a = \"multi\nline\";", KindString, 0, 0, false, "multi\nline", false},
		{`a = "#not // a /* comment";`, KindString, 0, 0, false, "#not // a /* comment", false},
		{`a = "日本";`, KindString, 0, 0, false, "日本", false},
	}
	for _, c := range cases {
		s := mustParse(t, c.src).Member("a")
		if s == nil {
			t.Errorf("%q: no setting a", c.src)
			continue
		}
		got := Setting{Name: "a", Line: 1, Kind: s.Kind, Int: s.Int, Float: s.Float, Bool: s.Bool, Str: s.Str, Hex: s.Hex}
		want := Setting{Name: "a", Line: 1, Kind: c.kind, Int: c.i, Float: c.f, Bool: c.b, Str: c.s, Hex: c.hex}
		if !reflect.DeepEqual(got, want) || s.Line != 1 {
			t.Errorf("%q: got %+v, want %+v", c.src, got, want)
		}
	}
}

func TestStructure(t *testing.T) {
	src := `# leading comment
name-with*odd_chars = 1; // trailing
grp : {
  inner = { deep = "x" }
  arr = [1, 2L, 3,];
  empty_arr = [];
  lst = ( 1, "two", [3.0], { g = 4; }, ( ), );
  /* block
     comment */ after = true
}, last = 0x10`
	root := mustParse(t, src)
	if got := root.Lookup("name-with*odd_chars"); got == nil || got.Int != 1 || got.Line != 2 {
		t.Errorf("odd name: %+v", got)
	}
	if got := root.Lookup("grp.inner.deep"); got == nil || got.Str != "x" || got.Line != 4 {
		t.Errorf("grp.inner.deep: %+v", got)
	}
	arr := root.Lookup("grp.arr")
	if arr.Kind != KindArray || arr.Len() != 3 || arr.Index(1).Kind != KindInt64 || arr.Index(2).Int != 3 {
		t.Errorf("arr: %+v", arr)
	}
	if e := root.Lookup("grp.empty_arr"); e.Kind != KindArray || e.Len() != 0 {
		t.Errorf("empty_arr: %+v", e)
	}
	lst := root.Lookup("grp.lst")
	kinds := []Kind{}
	for _, e := range lst.Elems {
		kinds = append(kinds, e.Kind)
	}
	if want := []Kind{KindInt, KindString, KindArray, KindGroup, KindList}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("list kinds %v, want %v", kinds, want)
	}
	if v := root.Lookup("grp.lst.[3].g"); v == nil || v.Int != 4 {
		t.Errorf("grp.lst.[3].g = %+v", v)
	}
	if v := root.Lookup("grp.lst[2][0]"); v == nil || v.Float != 3 {
		t.Errorf("grp.lst[2][0] = %+v", v)
	}
	if a := root.Lookup("grp.after"); a == nil || !a.Bool || a.Line != 9 {
		t.Errorf("after: %+v", a)
	}
	if l := root.Lookup("last"); l == nil || l.Int != 16 || l.Line != 10 {
		t.Errorf("last: %+v", l)
	}
	for _, p := range []string{"nope", "grp.nope", "grp.lst.[9]", "grp.lst.[x]", "grp.lst.[1", "last.x", "grp.arr.[-1]"} {
		if s := root.Lookup(p); s != nil {
			t.Errorf("Lookup(%q) = %+v, want nil", p, s)
		}
	}
	if root.Lookup("") != root {
		t.Error("Lookup(\"\") is not the receiver")
	}
}

func TestTypedAccessors(t *testing.T) {
	root := mustParse(t, `i = 3; l = 4L; f = 2.5; b = true; s = "x"; g = {};`)
	if v, err := root.Member("i").IntValue(); v != 3 || err != nil {
		t.Errorf("i: %v %v", v, err)
	}
	if v, err := root.Member("l").IntValue(); v != 4 || err != nil {
		t.Errorf("l: %v %v", v, err)
	}
	if v, err := root.Member("i").FloatValue(); v != 3 || err != nil {
		t.Errorf("i as float: %v %v", v, err)
	}
	if v, err := root.Member("f").FloatValue(); v != 2.5 || err != nil {
		t.Errorf("f: %v %v", v, err)
	}
	if v, err := root.Member("b").BoolValue(); !v || err != nil {
		t.Errorf("b: %v %v", v, err)
	}
	if v, err := root.Member("s").StringValue(); v != "x" || err != nil {
		t.Errorf("s: %v %v", v, err)
	}
	errs := map[string]error{}
	_, errs["s as int"] = root.Member("s").IntValue()
	_, errs["f as int"] = root.Member("f").IntValue()
	_, errs["i as bool"] = root.Member("i").BoolValue()
	_, errs["b as string"] = root.Member("b").StringValue()
	_, errs["g as float"] = root.Member("g").FloatValue()
	want := map[string]string{
		"s as int":    `want an integer, got string "x"`,
		"f as int":    `want an integer, got float 2.5`,
		"i as bool":   `want a boolean, got integer 3`,
		"b as string": `want a string, got boolean true`,
		"g as float":  `want a number, got group`,
	}
	for k, err := range errs {
		var te *TypeError
		if !errors.As(err, &te) || err.Error() != want[k] {
			t.Errorf("%s: %v, want %s", k, err, want[k])
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"a = ;", "f.conf:1: expected a value, found ';'"},
		{"a = 1; a = 2;", `f.conf:1: duplicate setting name "a"`},
		{"g = { a = 1;\n a = 2; };", `f.conf:2: duplicate setting name "a"`},
		{"a 5;", `f.conf:1: expected '=' or ':' after "a", found 5`},
		{"a = 1\nb = 2 3;", "f.conf:2: expected a setting name, found 3"},
		{"= 1;", "f.conf:1: expected a setting name, found '='"},
		{"true = 1;", "f.conf:1: expected a setting name, found true"},
		{"g = {\n a = 1;\n", "f.conf:3: unexpected end of file: missing '}'"},
		{"a = 1; }", "f.conf:1: unexpected '}' with no group open"},
		{"a = (1, 2", "f.conf:1: unexpected end of file: missing closing bracket for '('"},
		{"a = (1 2)", "f.conf:1: expected ',' or closing bracket, found 2"},
		{"a = (,1)", "f.conf:1: expected a value, found ','"},
		{"a = [1, \"x\"];", "f.conf:1: mismatched element type in array: string after integer"},
		{"a = [1, 2.0];", "f.conf:1: mismatched element type in array: float after integer"},
		{"a = [\n{}];", "f.conf:2: array elements must be scalars, found a group"},
		{"a = [(1)];", "f.conf:1: array elements must be scalars, found a list"},
		{"a = \"abc;\n\n", "f.conf:1: unterminated string"},
		{"a = 1;\n/* open\n", "f.conf:2: unterminated /* comment"},
		{"a = 99999999999999999999;", "f.conf:1: integer 99999999999999999999 does not fit in 64 bits"},
		{"a = 0x1FFFFFFFFFFFFFFFF;", "f.conf:1: hex integer 0x1FFFFFFFFFFFFFFFF does not fit in 64 bits"},
		{"a = 1e999;", "f.conf:1: float 1e999 out of range"},
		{"a = .;", `f.conf:1: malformed number "."`},
		{"a = -.e5;", `f.conf:1: malformed number "-.e5"`},
		{"a = -;", "f.conf:1: unexpected character '-'"},
		{"a = 1; $b = 2;", "f.conf:1: unexpected character '$'"},
		{"a = bare;", `f.conf:1: expected a value, found name "bare"`},
		{"\n  @include \"other.cfg\"\n", "f.conf:2: @include is not supported"},
		{"a = 1 @include \"x\"", "f.conf:1: unexpected character '@'"},
		{"a = -0x5;", `f.conf:1: expected '=' or ':' after "x5", found ';'`},
		{"a = 1\n\n\nb", "f.conf:4: expected '=' or ':' after \"b\", found end of file"},
		{"a = ", "f.conf:1: unexpected end of file: missing value"},
		{"a = " + strings.Repeat("(", MaxDepth+1), "f.conf:1: nesting deeper than 256 levels"},
	}
	for _, c := range cases {
		_, err := Parse("f.conf", []byte(c.src))
		var pe *Error
		if err == nil || err.Error() != c.want || !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error = %v, want %s", c.src, err, c.want)
		}
	}
}

func TestEmptyDocuments(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only a comment", "/* c */ // d\n"} {
		root := mustParse(t, src)
		if root.Kind != KindGroup || root.Len() != 0 {
			t.Errorf("%q: %+v", src, root)
		}
	}
}

// stripLines zeroes line numbers so trees can be compared across a
// format/parse round trip.
func stripLines(s *Setting) {
	s.Line = 0
	for _, e := range s.Elems {
		stripLines(e)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	srcs := []string{
		`a = 1; b = -2L; c = 0x1F; d = 0xFFFFFFFFL; e = 2.0; f = -0.0; g = 1e300; h = true;
		 s = "q\"\\\n\r\t\f\x01\x7f end"; arr = [1, 2]; sa = ["x", "y"]; ea = []; el = ();
		 grp = { in = { deep = (1, { x = "y"; }, [1.5], ()); }; };`,
	}
	files, _ := filepath.Glob("../table/meta/*.meta")
	files = append(files, shippedConf)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(data))
	}
	for i, src := range srcs {
		a := mustParse(t, src)
		out := Format(a)
		b, err := Parse("formatted", out)
		if err != nil {
			t.Fatalf("source %d: re-parse of formatted output: %v\n%s", i, err, out)
		}
		stripLines(a)
		stripLines(b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("source %d: round trip changed the tree:\n%s", i, out)
		}
	}
}

func TestFormatLayout(t *testing.T) {
	root := mustParse(t, `top = 1; g = { s = "x"; l = ({ n = 1; }, 2); a = [1, 2]; };`)
	want := `top = 1;

g =
{
    s = "x";
    l = (
        {
            n = 1;
        },
        2
    );
    a = [1, 2];
};
`
	if got := string(Format(root)); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}
