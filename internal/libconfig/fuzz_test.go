package libconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives Format and a second Parse unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../table/meta/*.meta")
	for _, name := range append(files, shippedConf) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`a = 1; b = 2L; c = 0xff; d = 1.5e3; e = "x" "y"; f = [1,2,]; g = (1, {h = true;},); i : {};`,
		"a = \"esc \\x41 \\q \\\" \\\\\";\n/* c */ # c\n// c\n",
		"@include \"x\"\n",
		"a = -.e5;",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse("fuzz", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		out := Format(a)
		b, err := Parse("formatted", out)
		if err != nil {
			t.Fatalf("formatted output does not parse: %v\n%s", err, out)
		}
		stripLines(a)
		stripLines(b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the tree:\n%s", out)
		}
	})
}
